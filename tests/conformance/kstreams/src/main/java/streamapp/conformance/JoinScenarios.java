package streamapp.conformance;

import java.time.Duration;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TableJoined;
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

  /** A stream joined with a GlobalKTable of in(1), looked up by the stream record's own key. */
  public static void streamGlobalTableLeftJoin(StreamsBuilder b, Oracle.Io io) {
    GlobalKTable<String, String> right = b.globalTable(io.in(1), Consumed.with(S, S));
    stream(b, io.in(0)).leftJoin(right, (k, v) -> k, (l, r) -> l + "@" + or(r)).to(io.output(), Produced.with(S, S));
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

  /** The foreign key of a left value (a digit) as the manifests compute it: 0-8 → a-f, 9 → null. */
  private static String foreignKey(String v) {
    return v.equals("9") ? null : String.valueOf("abcdef".charAt(Integer.parseInt(v) % 6));
  }

  /**
   * How scenarios.generate partitions its input (key a-f: its index modulo the partition count),
   * not Kafka's default partitioner: Kafka Streams must send a subscription to the partition that
   * holds its foreign key in the right table, so the foreign-key joins are told (TableJoined). The
   * responses go back to the left row's own partition (the default). A leftJoin sends a null foreign
 * key too (its response is the result with no right value): any partition answers it.
   */
  private static final TableJoined<String, String> AS_GENERATED = TableJoined.with(
      null, (String topic, String key, Void value, int n) ->
          key == null ? Optional.empty() : Optional.of(Set.of("abcdef".indexOf(key) % n)));

  public static void fkJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    table(b, io.in(0)).join(right, JoinScenarios::foreignKey, (l, r) -> l + "@" + r, AS_GENERATED)
        .toStream().to(io.output(), Produced.with(S, S));
  }

  public static void fkLeftJoin(StreamsBuilder b, Oracle.Io io) {
    KTable<String, String> right = table(b, io.in(1));
    table(b, io.in(0)).leftJoin(right, JoinScenarios::foreignKey, (l, r) -> l + "@" + or(r), AS_GENERATED)
        .toStream().to(io.output(), Produced.with(S, S));
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
