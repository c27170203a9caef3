package streamapp.conformance;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/**
 * Runs conformance scenarios in Kafka Streams, many at once in one JVM, and says when each has
 * processed all of its input.
 *
 * <p>Usage: {@code Oracle BOOTSTRAP STATE_DIR}, then one line per run on stdin:
 * {@code SCENARIO APP_ID OUTPUT_TOPIC INPUT_TOPIC...}, ended by EOF. SCENARIO names a public static
 * method {@code (StreamsBuilder, Io)} of {@link Scenarios} or {@link JoinScenarios}. Every run is its own KafkaStreams
 * instance (one thread, record caches off, so its changelog is deterministic). When a run's
 * committed offsets reach the end of its input and repartition topics, it prints one JSON line
 * {@code {"run": APP_ID, "scenario": ..., "dropped": N, "description": ...}} and closes; then "done".
 * {@code dropped} is Kafka Streams' task metric dropped-records-total summed over the tasks.
 */
public final class Oracle {
  /** The topics of one run: inputs in the order the scenario declares them, and its output. */
  public record Io(List<String> inputs, String output) {
    public String in(int i) {
      return inputs.get(i);
    }
  }

  private record Run(
      String scenario, String appId, Io io, KafkaStreams streams, String description, Set<String> global) {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], stateDir = args[1];
    List<Run> runs = new ArrayList<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      String[] f = line.trim().split("\\s+");
      Io io = new Io(Arrays.asList(Arrays.copyOfRange(f, 3, f.length)), f[2]);
      Method method = scenario(f[0]);
      StreamsBuilder builder = new StreamsBuilder();
      method.invoke(null, builder, io);
      var topology = builder.build();
      KafkaStreams streams = new KafkaStreams(topology, props(bootstrap, stateDir, f[1]));
      // A GlobalKTable's topic is read by the global thread, in full before processing, outside
      // the consumer group: it has no committed offsets to wait for.
      Set<String> global = new HashSet<>();
      topology.describe().globalStores().forEach(g -> global.addAll(g.source().topicSet()));
      runs.add(new Run(f[0], f[1], io, streams, topology.describe().toString(), global));
    }
    for (Run run : runs) {
      run.streams.start();
    }
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    long deadline = System.currentTimeMillis() + 600_000;
    try (Admin admin = Admin.create(adminProps)) {
      Map<String, Integer> settled = new HashMap<>();
      List<Run> pending = new ArrayList<>(runs);
      while (!pending.isEmpty()) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("runs did not finish in 10 minutes: " + pending);
        }
        Thread.sleep(300);
        for (Run run : new ArrayList<>(pending)) {
          if (run.streams.state() == KafkaStreams.State.ERROR) {
            throw new IllegalStateException(run.appId + " failed");
          }
          // Caught up twice in a row: nothing was in flight between the two looks.
          int n = caughtUp(admin, run) ? settled.merge(run.appId, 1, Integer::sum) : 0;
          settled.put(run.appId, n);
          if (n >= 2) {
            System.out.println(report(run));
            System.out.flush();
            run.streams.close();
            pending.remove(run);
          }
        }
      }
    }
    System.out.println("done");
  }

  /** The scenario's method: in {@link Scenarios}, else in {@link JoinScenarios}. */
  private static Method scenario(String name) throws NoSuchMethodException {
    try {
      return Scenarios.class.getMethod(name, StreamsBuilder.class, Io.class);
    } catch (NoSuchMethodException e) {
      return JoinScenarios.class.getMethod(name, StreamsBuilder.class, Io.class);
    }
  }

  private static Properties props(String bootstrap, String stateDir, String appId) {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
    // Emit-final windows: emit on every record that closes one, not at most once a second
    // (wall-clock throttling would make the output depend on timing).
    p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
    // Stream-stream left/outer joins: emit a closed window's unmatched records as soon as stream
    // time passes it, not at most once a second of wall-clock time (join_scenarios.py).
    p.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
    return p;
  }

  private static boolean caughtUp(Admin admin, Run run) throws Exception {
    if (run.streams.state() != KafkaStreams.State.RUNNING) {
      return false;
    }
    Set<String> topics = new HashSet<>(run.io.inputs);
    topics.removeAll(run.global);
    String prefix = run.appId + "-";
    for (String t : admin.listTopics().names().get()) {
      // Repartition topics, and a foreign-key join's subscription and response topics.
      if (t.startsWith(prefix) && (t.endsWith("-repartition") || t.endsWith("-topic"))) {
        topics.add(t);
      }
    }
    Map<TopicPartition, OffsetAndMetadata> committed =
        admin.listConsumerGroupOffsets(run.appId).partitionsToOffsetAndMetadata().get();
    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
    for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
      for (TopicPartitionInfo p : d.partitions()) {
        latest.put(new TopicPartition(d.name(), p.partition()), OffsetSpec.latest());
      }
    }
    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all().get();
    for (var e : ends.entrySet()) {
      OffsetAndMetadata c = committed.get(e.getKey());
      if (e.getValue().offset() > (c == null ? 0 : c.offset())) {
        return false;
      }
    }
    return true;
  }

  private static String report(Run run) {
    double dropped = 0;
    for (Map.Entry<MetricName, ? extends Metric> e : run.streams.metrics().entrySet()) {
      MetricName name = e.getKey();
      if (name.name().equals("dropped-records-total") && name.group().equals("stream-task-metrics")) {
        dropped += ((Number) e.getValue().metricValue()).doubleValue();
      }
    }
    return "{\"run\": \"" + run.appId + "\", \"scenario\": \"" + run.scenario + "\", \"dropped\": "
        + (long) dropped + ", \"description\": \"" + escape(run.description) + "\"}";
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n").replace("\t", "\\t");
  }
}
