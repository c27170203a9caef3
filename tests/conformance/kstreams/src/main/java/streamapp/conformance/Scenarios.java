package streamapp.conformance;

import java.time.Duration;
import java.util.List;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;

/**
 * The Kafka Streams side of every conformance scenario: one public static method per scenario,
 * named as in tests/conformance/scenarios.py, building the same topology as the scenario's
 * StreamApp manifest. Input records are (String key, String value) with values that are decimal
 * integers or null; keys may be null.
 *
 * <p>Windowed aggregations are preceded by {@link #present}: Kafka Streams' aggregations skip
 * records with a null key or value anyway, but count them in the same dropped-records metric as
 * late records; filtering them first leaves the output unchanged and makes that metric the count
 * of late records, which StreamApp reports too.
 */
public final class Scenarios {
  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();

  private Scenarios() {}

  private static KStream<String, String> stream(StreamsBuilder b, String topic) {
    return b.stream(topic, Consumed.with(S, S));
  }

  private static KStream<String, String> present(KStream<String, String> s) {
    return s.filter((k, v) -> k != null && v != null);
  }

  /** Windowed counts see null values (Kafka Streams decides what they do); null keys are dropped
   * first so that dropped-records counts only late records. */
  private static KStream<String, String> keyed(KStream<String, String> s) {
    return s.filter((k, v) -> k != null);
  }

  private static long num(String v) {
    return Long.parseLong(v);
  }

  /** A windowed table written as StreamApp writes it: key "k@start/end", the value as a long. */
  private static void windowed(KTable<Windowed<String>, Long> t, Oracle.Io io) {
    t.toStream((w, v) -> w.key() + "@" + w.window().start() + "/" + w.window().end())
        .to(io.output(), Produced.with(S, L));
  }

  private static KGroupedStream<String, String> byKey(KStream<String, String> s) {
    return s.groupByKey(Grouped.with(S, S));
  }

  // -- stateless --------------------------------------------------------------------------------

  public static void stateless(StreamsBuilder b, Oracle.Io io) {
    stream(b, io.in(0))
        .filter((k, v) -> v != null && num(v) % 3 != 0)
        .filterNot((k, v) -> k == null)
        .mapValues(v -> "v" + v)
        .flatMapValues(v -> List.of(v, v + "x"))
        .to(io.output(), Produced.with(S, S));
  }

  /** A Kafka Streams app's case mapping: String's, in the JVM's default locale. */
  public static void caseMapping(StreamsBuilder b, Oracle.Io io) {
    stream(b, io.in(0))
        .mapValues(v -> v == null ? null : v.toLowerCase() + "|" + v.toUpperCase())
        .to(io.output(), Produced.with(S, S));
  }

  // -- grouped streams --------------------------------------------------------------------------

  public static void countByKey(StreamsBuilder b, Oracle.Io io) {
    byKey(stream(b, io.in(0))).count(Materialized.with(S, L)).toStream().to(io.output(), Produced.with(S, L));
  }

  public static void countRekeyed(StreamsBuilder b, Oracle.Io io) {
    stream(b, io.in(0))
        .groupBy((k, v) -> v == null ? null : "g" + (num(v) % 3), Grouped.with(S, S))
        .count(Materialized.with(S, L))
        .toStream()
        .to(io.output(), Produced.with(S, L));
  }

  // -- windows ----------------------------------------------------------------------------------

  public static void tumblingFinal(StreamsBuilder b, Oracle.Io io) {
    windowed(
        byKey(keyed(stream(b, io.in(0))))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count(Materialized.with(S, L)),
        io);
  }

  /** The manifest's declarative {@code sum}: a windowed aggregation hands a null value to the
   * aggregator, which adds nothing for it (SQL's sum skips nulls); the record still opens its
   * windows, moves stream time and the window's timestamp, as any record does in Kafka Streams. */
  public static void tumblingRekeyed(StreamsBuilder b, Oracle.Io io) {
    windowed(
        stream(b, io.in(0))
            .groupBy((k, v) -> v == null ? null : "g" + (num(v) % 5), Grouped.with(S, S))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
            .count(Materialized.with(S, L)),
        io);
  }

  public static void hoppingSum(StreamsBuilder b, Oracle.Io io) {
    windowed(
        byKey(keyed(stream(b, io.in(0))))
            .windowedBy(
                TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(3))
                    .advanceBy(Duration.ofSeconds(5)))
            .aggregate(() -> 0L, (k, v, agg) -> v == null ? agg : agg + num(v), Materialized.with(S, L)),
        io);
  }

  /** A windowed cogroup hands null values to the adders (as conformance_functions' do, these add
   * nothing for them). */
  public static void cogroupWindowed(StreamsBuilder b, Oracle.Io io) {
    KGroupedStream<String, String> first = byKey(keyed(stream(b, io.in(0))));
    KGroupedStream<String, String> second = byKey(keyed(stream(b, io.in(1))));
    windowed(
        first.<Long>cogroup((k, v, agg) -> v == null ? agg : agg + num(v))
            .cogroup(second, (k, v, agg) -> v == null ? agg : agg + 10 * num(v))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
            .aggregate(() -> 0L, Materialized.with(S, L)),
        io);
  }

  /** A cogroup without windows: Kafka Streams' KStreamAggregate skips null values (no adder call,
   * no timestamp), so the adders never see one. */
  public static void cogroupByKey(StreamsBuilder b, Oracle.Io io) {
    KGroupedStream<String, String> first = byKey(stream(b, io.in(0)));
    KGroupedStream<String, String> second = byKey(stream(b, io.in(1)));
    first.<Long>cogroup((k, v, agg) -> agg + num(v))
        .cogroup(second, (k, v, agg) -> agg + 10 * num(v))
        .aggregate(() -> 0L, Materialized.with(S, L))
        .toStream()
        .to(io.output(), Produced.with(S, L));
  }

  // -- tables -----------------------------------------------------------------------------------

  public static void tableSource(StreamsBuilder b, Oracle.Io io) {
    b.table(io.in(0), Consumed.with(S, S)).toStream().to(io.output(), Produced.with(S, S));
  }

  public static void tableGroupBySubtractor(StreamsBuilder b, Oracle.Io io) {
    b.table(io.in(0), Consumed.with(S, S))
        .groupBy((k, v) -> KeyValue.pair("g" + (num(v) % 3), v), Grouped.with(S, S))
        .aggregate(() -> 0L, (k, v, agg) -> agg + num(v), (k, v, agg) -> agg - num(v), Materialized.with(S, L))
        .toStream()
        .to(io.output(), Produced.with(S, L));
  }

  // -- every window kind x emit updates / emit final / suppress (count per window) ---------------

  private static final Duration GRACE = Duration.ofSeconds(5);

  private static TimeWindowedKStream<String, String> tumbling(StreamsBuilder b, Oracle.Io io) {
    return byKey(keyed(stream(b, io.in(0)))).windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), GRACE));
  }

  private static TimeWindowedKStream<String, String> hopping(StreamsBuilder b, Oracle.Io io) {
    return byKey(keyed(stream(b, io.in(0))))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), GRACE).advanceBy(Duration.ofSeconds(4)));
  }

  private static TimeWindowedKStream<String, String> sliding(StreamsBuilder b, Oracle.Io io) {
    return byKey(keyed(stream(b, io.in(0))))
        .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(6), GRACE));
  }

  private static SessionWindowedKStream<String, String> session(StreamsBuilder b, Oracle.Io io) {
    return byKey(keyed(stream(b, io.in(0))))
        .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(3), GRACE));
  }

  private static <W> KTable<Windowed<String>, Long> suppressed(KTable<Windowed<String>, Long> t) {
    return t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
  }

  public static void tumblingUpdates(StreamsBuilder b, Oracle.Io io) {
    windowed(tumbling(b, io).count(Materialized.with(S, L)), io);
  }

  public static void tumblingSuppress(StreamsBuilder b, Oracle.Io io) {
    windowed(suppressed(tumbling(b, io).count(Materialized.with(S, L))), io);
  }

  public static void hoppingUpdates(StreamsBuilder b, Oracle.Io io) {
    windowed(hopping(b, io).count(Materialized.with(S, L)), io);
  }

  public static void hoppingFinal(StreamsBuilder b, Oracle.Io io) {
    windowed(hopping(b, io).emitStrategy(EmitStrategy.onWindowClose()).count(Materialized.with(S, L)), io);
  }

  public static void hoppingSuppress(StreamsBuilder b, Oracle.Io io) {
    windowed(suppressed(hopping(b, io).count(Materialized.with(S, L))), io);
  }

  public static void slidingUpdates(StreamsBuilder b, Oracle.Io io) {
    windowed(sliding(b, io).count(Materialized.with(S, L)), io);
  }

  public static void slidingFinal(StreamsBuilder b, Oracle.Io io) {
    windowed(sliding(b, io).emitStrategy(EmitStrategy.onWindowClose()).count(Materialized.with(S, L)), io);
  }

  public static void slidingSuppress(StreamsBuilder b, Oracle.Io io) {
    windowed(suppressed(sliding(b, io).count(Materialized.with(S, L))), io);
  }

  public static void sessionUpdates(StreamsBuilder b, Oracle.Io io) {
    windowed(session(b, io).count(Materialized.with(S, L)), io);
  }

  public static void sessionFinal(StreamsBuilder b, Oracle.Io io) {
    windowed(session(b, io).emitStrategy(EmitStrategy.onWindowClose()).count(Materialized.with(S, L)), io);
  }

  public static void sessionSuppress(StreamsBuilder b, Oracle.Io io) {
    windowed(suppressed(session(b, io).count(Materialized.with(S, L))), io);
  }

  public static void mergeWindowed(StreamsBuilder b, Oracle.Io io) {
    windowed(
        byKey(keyed(stream(b, io.in(0)).merge(stream(b, io.in(1)))))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), GRACE))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count(Materialized.with(S, L)),
        io);
  }

  // -- more tables and aggregations -------------------------------------------------------------

  public static void toTable(StreamsBuilder b, Oracle.Io io) {
    stream(b, io.in(0)).toTable().toStream().to(io.output(), Produced.with(S, S));
  }

  public static void tableFilterMapValues(StreamsBuilder b, Oracle.Io io) {
    b.table(io.in(0), Consumed.with(S, S))
        .filter((k, v) -> num(v) % 2 == 0)
        .mapValues(v -> "t" + v)
        .toStream()
        .to(io.output(), Produced.with(S, S));
  }

  public static void reduceByKey(StreamsBuilder b, Oracle.Io io) {
    byKey(stream(b, io.in(0)))
        .reduce((agg, v) -> num(v) > num(agg) ? v : agg, Materialized.with(S, S))
        .toStream()
        .to(io.output(), Produced.with(S, S));
  }

  public static void countOnEngine(StreamsBuilder b, Oracle.Io io) {
    countByKey(b, io);
    b.table(io.in(1), Consumed.with(S, S)).toStream().filter((k, v) -> false).to(io.output(), Produced.with(S, S));
  }

  // -- the order of final results that close on one record (long keys, one partition) ----------

  /** Long keys: the order Kafka Streams emits windows closing together in is its stores' order of
   * the serialised keys (8 bytes big-endian), which a key's text does not give (10 before 9). */
  private static KGroupedStream<Long, String> longKeys(StreamsBuilder b, Oracle.Io io) {
    return b.stream(io.in(0), Consumed.with(L, S)).filter((k, v) -> k != null).groupByKey(Grouped.with(L, S));
  }

  private static void windowedLong(KTable<Windowed<Long>, Long> t, Oracle.Io io) {
    t.toStream((w, v) -> w.key() + "@" + w.window().start() + "/" + w.window().end())
        .to(io.output(), Produced.with(S, L));
  }

  public static void keyOrderTumblingFinal(StreamsBuilder b, Oracle.Io io) {
    windowedLong(
        longKeys(b, io)
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), GRACE))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count(Materialized.with(L, L)),
        io);
  }

  /** tumblingFinal's topology; the input's text keys order differently as UTF-8 and UTF-16. */
  public static void keyOrderTextTumblingFinal(StreamsBuilder b, Oracle.Io io) {
    tumblingFinal(b, io);
  }

  public static void keyOrderTumblingSuppress(StreamsBuilder b, Oracle.Io io) {
    windowedLong(
        longKeys(b, io)
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), GRACE))
            .count(Materialized.with(L, L))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())),
        io);
  }

  public static void keyOrderSessionFinal(StreamsBuilder b, Oracle.Io io) {
    windowedLong(
        longKeys(b, io)
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(3), GRACE))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count(Materialized.with(L, L)),
        io);
  }

  public static void keyOrderSessionSuppress(StreamsBuilder b, Oracle.Io io) {
    windowedLong(
        longKeys(b, io)
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(3), GRACE))
            .count(Materialized.with(L, L))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())),
        io);
  }
}
