package streamapp.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * The benchmark topologies in Kafka Streams, to compare StreamApp against the library it follows.
 * Usage: KStreamsBench BOOTSTRAP (stateless|wordcount|join|tumbling|session) INPUT OUTPUT APP_ID STATE_DIR [COMMIT_INTERVAL_MS [TABLE]]
 * (join: INPUT joined with the table read from TABLE, value {@code <value>@<table value>}; tumbling and
 * session: counts per key and window, key {@code <key>@<start>/<end>}, as tests/bench/windowed.py describes).
 * Runs until killed; the harness measures from the outside (output topic, process CPU time).
 * COMMIT_INTERVAL_MS (default: Kafka Streams' own, 30 s under at-least-once) also bounds how long the
 * word count's record cache holds updates back, so the harness passes a short one: otherwise a drain
 * would be judged complete up to 30 s after the work was done.
 */
public final class KStreamsBench {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topology = args[1], input = args[2], output = args[3];
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    if (args.length > 6) {
      props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[6]);
    }
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, String> lines = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
    if (topology.equals("stateless")) {
      lines.filter((k, v) -> v != null && v.contains("a"))
          .mapValues(v -> v.toUpperCase(Locale.ROOT))
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else if (topology.equals("wordcount")) {
      lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
          .filter((k, w) -> !w.isEmpty())
          .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
          .count()
          .toStream()
          .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    } else if (topology.equals("join")) {
      KTable<String, String> table = builder.table(args[7], Consumed.with(Serdes.String(), Serdes.String()));
      lines.join(table, (v, r) -> v + "@" + r).to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else if (topology.equals("tumbling")) {
      lines.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
          .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(10)))
          .count()
          .toStream((wk, n) -> wk.key() + "@" + wk.window().start() + "/" + wk.window().end())
          .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    } else if (topology.equals("session")) {
      lines.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
          .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMinutes(5), Duration.ofSeconds(10)))
          .count()
          .toStream((wk, n) -> wk.key() + "@" + wk.window().start() + "/" + wk.window().end())
          .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    } else {
      throw new IllegalArgumentException("unknown topology " + topology);
    }
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> { streams.close(); done.countDown(); }));
    streams.start();
    System.out.println("started " + topology);
    done.await();
  }
}
