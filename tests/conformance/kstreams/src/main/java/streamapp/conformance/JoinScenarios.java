package streamapp.conformance;

import java.time.Duration;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * The join scenarios of tests/conformance/join_scenarios.py in Kafka Streams: one public static
 * method per scenario, {@code in(0)} the left stream or table, {@code in(1)} the right one.
 * The joiners are those of the manifests: {@code left@right}, with "-" for a missing side.
 */
public final class JoinScenarios {
  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();
  private static final JoinWindows WINDOWS = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(3), Duration.ofSeconds(5));

  private JoinScenarios() {}

  private static String or(String v) {
    return v == null ? "-" : v;
  }

  private static KStream<String, String> stream(StreamsBuilder b, String topic) {
    return b.stream(topic, Consumed.with(S, S));
  }

  private static KTable<String, String> table(StreamsBuilder b, String topic) {
    return b.table(topic, Consumed.with(S, S));
  }

  private static StreamJoined<String, String, String> joined() {
    return StreamJoined.with(S, S, S);
  }

  public static void streamTableJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    stream(b, io.in(0)).join(right, (l, r) -> l + "@" + r).to(io.output(), Produced.with(S, S));
  }

  public static void streamTableLeftJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    stream(b, io.in(0)).leftJoin(right, (l, r) -> l + "@" + or(r)).to(io.output(), Produced.with(S, S));
  }

  public static void streamStreamJoin(StreamsBuilder b, Oracle.Io io) {
    KStream<String, String> right = stream(b, io.in(1));
    stream(b, io.in(0)).join(right, (l, r) -> l + "@" + r, WINDOWS, joined()).to(io.output(), Produced.with(S, S));
  }

  public static void streamStreamLeftJoin(StreamsBuilder b, Oracle.Io io) {
    KStream<String, String> right = stream(b, io.in(1));
    stream(b, io.in(0)).leftJoin(right, (l, r) -> l + "@" + or(r), WINDOWS, joined())
        .to(io.output(), Produced.with(S, S));
  }

  public static void streamStreamOuterJoin(StreamsBuilder b, Oracle.Io io) {
    KStream<String, String> right = stream(b, io.in(1));
    stream(b, io.in(0)).outerJoin(right, (l, r) -> or(l) + "@" + or(r), WINDOWS, joined())
        .to(io.output(), Produced.with(S, S));
  }

  public static void tableTableJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    table(b, io.in(0)).join(right, (l, r) -> l + "@" + r).toStream().to(io.output(), Produced.with(S, S));
  }

  public static void tableTableLeftJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    table(b, io.in(0)).leftJoin(right, (l, r) -> l + "@" + or(r)).toStream().to(io.output(), Produced.with(S, S));
  }

  public static void tableTableOuterJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    table(b, io.in(0)).outerJoin(right, (l, r) -> or(l) + "@" + or(r)).toStream().to(io.output(), Produced.with(S, S));
  }

  /** runtime/cli/examples/pageviews-by-region.yaml: views joined with the profile table (the
   * value becomes the region), re-keyed by region, counted per minute with 30 s grace. */
  public static void pageViewsByRegion(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> profiles = table(b, io.in(1));
    stream(b, io.in(0)).join(profiles, (page, region) -> region)
        .selectKey((user, region) -> region)
        .groupByKey(Grouped.with(S, S))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
        .count(Materialized.with(S, L))
        .toStream((w, n) -> w.key() + "@" + w.window().start() + "/" + w.window().end())
        .to(io.output(), Produced.with(S, L));
  }
}
