package streamapp.joins;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * The join scenarios of StreamApp's join tests, in Kafka Streams: the oracle they are compared with.
 * Usage: JoinsOracle SCENARIO BOOTSTRAP APP_ID STATE_DIR NAME=TOPIC... (the scenario's logical topic
 * names mapped to real topics). Runs until its group has committed every input record (then all its
 * output is written), prints "dropped-records N" (the records its tasks dropped: late puts into
 * the join window stores, and records skipped for a null key or value) and exits.
 * The record cache is off (every update is forwarded, as StreamApp's joins do) and the outer-join
 * emit throttle is 0 (StreamApp emits closed windows' results as soon as stream time passes).
 */
public final class JoinsOracle {
  private static String or(String value) {
    return value == null ? "-" : value;
  }

  private static boolean internalCaughtUp(Admin admin, String appId, Map<TopicPartition, OffsetAndMetadata> committed)
      throws Exception {
    List<String> internal = new ArrayList<>();
    for (String t : admin.listTopics().names().get()) {
      if (t.startsWith(appId + "-") && (t.endsWith("-repartition") || t.endsWith("-topic"))) {
        internal.add(t);
      }
    }
    if (internal.isEmpty()) {
      return true;
    }
    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
    for (TopicDescription d : admin.describeTopics(internal).allTopicNames().get().values()) {
      d.partitions().forEach(p -> latest.put(new TopicPartition(d.name(), p.partition()), OffsetSpec.latest()));
    }
    for (var e : admin.listOffsets(latest).all().get().entrySet()) {
      OffsetAndMetadata c = committed.get(e.getKey());
      if (e.getValue().offset() > (c == null ? 0 : c.offset())) {
        return false;
      }
    }
    return true;
  }

  public static void main(String[] args) throws Exception {
    String scenario = args[0];
    Map<String, String> topics = new HashMap<>();
    for (int i = 4; i < args.length; i++) {
      String[] kv = args[i].split("=", 2);
      topics.put(kv[0], kv[1]);
    }
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
    props.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", "0");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
    Produced<String, String> out = Produced.with(Serdes.String(), Serdes.String());
    StreamsBuilder builder = new StreamsBuilder();
    List<String> inputs = new ArrayList<>();
    switch (scenario) {
      case "stream-table": {
        inputs.addAll(List.of(topics.get("users"), topics.get("views")));
        KTable<String, String> users = builder.table(topics.get("users"), strings);
        KStream<String, String> views = builder.stream(topics.get("views"), strings);
        views.join(users, (l, r) -> l + "@" + r).to(topics.get("joined"), out);
        views.leftJoin(users, (l, r) -> l + "@" + or(r)).to(topics.get("left-joined"), out);
        break;
      }
      case "stream-stream": {
        inputs.addAll(List.of(topics.get("impressions"), topics.get("clicks")));
        KStream<String, String> impressions = builder.stream(topics.get("impressions"), strings);
        KStream<String, String> clicks = builder.stream(topics.get("clicks"), strings);
        JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5));
        StreamJoined<String, String, String> joined = StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
        impressions.join(clicks, (l, r) -> l + "+" + r, windows, joined).to(topics.get("inner"), out);
        impressions.leftJoin(clicks, (l, r) -> l + "+" + or(r), windows, joined).to(topics.get("left"), out);
        impressions.outerJoin(clicks, (l, r) -> or(l) + "+" + or(r), windows, joined).to(topics.get("outer"), out);
        break;
      }
      case "table-table": {
        inputs.addAll(List.of(topics.get("left-table"), topics.get("right-table")));
        KTable<String, String> left = builder.table(topics.get("left-table"), strings);
        KTable<String, String> right = builder.table(topics.get("right-table"), strings);
        left.join(right, (l, r) -> l + "=" + r).toStream().to(topics.get("inner"), out);
        left.leftJoin(right, (l, r) -> l + "=" + or(r)).toStream().to(topics.get("left"), out);
        left.outerJoin(right, (l, r) -> or(l) + "=" + or(r)).toStream().to(topics.get("outer"), out);
        break;
      }
      case "rekeyed-stream-table": {
        inputs.addAll(List.of(topics.get("users"), topics.get("views")));
        KTable<String, String> users = builder.table(topics.get("users"), strings);
        KStream<String, String> views = builder.stream(topics.get("views"), strings);
        views.selectKey((k, v) -> v.split("\\|")[0])
            .leftJoin(users, (k, l, r) -> k + ":" + l.split("\\|")[1] + "@" + or(r))
            .to(topics.get("left-joined"), out);
        break;
      }
      case "stream-global": {
        // The global table is read by the global thread, outside the group: it is restored in full
        // before the stream threads start, so only the stream input is waited for.
        inputs.add(topics.get("orders"));
        GlobalKTable<String, String> regions = builder.globalTable(topics.get("regions"), strings);
        KStream<String, String> orders = builder.stream(topics.get("orders"), strings);
        orders.join(regions, (k, v) -> v, (k, l, r) -> k + ":" + l + "@" + r).to(topics.get("joined"), out);
        orders.leftJoin(regions, (k, v) -> v, (k, l, r) -> k + ":" + l + "@" + or(r)).to(topics.get("left-joined"), out);
        break;
      }
      case "fk": {
        // Orders (key: order id, value "customer:item") joined with customers by the customer id
        // before ':' (an empty one is a null foreign key).
        inputs.addAll(List.of(topics.get("orders"), topics.get("customers")));
        KTable<String, String> orders = builder.table(topics.get("orders"), strings);
        KTable<String, String> customers = builder.table(topics.get("customers"), strings);
        java.util.function.Function<String, String> customer = v -> v.split(":")[0].isEmpty() ? null : v.split(":")[0];
        orders.join(customers, customer, (l, r) -> l + "@" + r).toStream().to(topics.get("inner"), out);
        orders.leftJoin(customers, customer, (l, r) -> l + "@" + or(r)).toStream().to(topics.get("left"), out);
        break;
      }
      default:
        throw new IllegalArgumentException("unknown scenario " + scenario);
    }
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("Kafka Streams failed: " + e);
      e.printStackTrace();
      System.exit(2);
      return null;
    });
    streams.start();
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]))) {
      Map<TopicPartition, OffsetSpec> ends = new HashMap<>();
      for (TopicDescription d : admin.describeTopics(inputs).allTopicNames().get().values()) {
        d.partitions().forEach(p -> ends.put(new TopicPartition(d.name(), p.partition()), OffsetSpec.latest()));
      }
      Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> end = admin.listOffsets(ends).all().get();
      long deadline = System.currentTimeMillis() + 180_000;
      int settled = 0;
      while (true) {
        Map<TopicPartition, OffsetAndMetadata> committed =
            admin.listConsumerGroupOffsets(args[2]).partitionsToOffsetAndMetadata().get();
        boolean caughtUp = end.entrySet().stream().allMatch(e -> e.getValue().offset() == 0
            || (committed.get(e.getKey()) != null && committed.get(e.getKey()).offset() >= e.getValue().offset()));
        // Internal topics (repartition, foreign-key subscription and response topics) are written
        // while the app runs: caught up on them too, twice in a row, nothing is in flight.
        caughtUp = caughtUp && internalCaughtUp(admin, args[2], committed);
        settled = caughtUp ? settled + 1 : 0;
        if (settled >= 2) {
          break;
        }
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException(
              "Kafka Streams did not consume its inputs in 180 s (state " + streams.state() + "): " + committed);
        }
        Thread.sleep(200);
      }
    }
    double dropped = 0;
    for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
      if (e.getKey().name().equals("dropped-records-total") && e.getKey().group().equals("stream-task-metrics")) {
        dropped += ((Number) e.getValue().metricValue()).doubleValue();
      }
    }
    streams.close(Duration.ofSeconds(30));
    System.out.println("dropped-records " + (long) dropped);
  }
}
