package io.streamapp.spark;

import static io.streamapp.spark.WindowRuns.batch;
import static io.streamapp.spark.WindowRuns.record;
import static io.streamapp.spark.WindowRuns.started;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Session windows: merging within the gap, the merged sessions' tombstones, closing, late drops. */
class SessionWindowAggregationTest {
  private final StateStore store = new StateStore();
  private final LongAccumulator late = new LongAccumulator();

  private SessionWindowAggregation.Processor processor(long gap, long grace, String emit, String function) {
    SessionWindowAggregation.Spec spec =
        new SessionWindowAggregation.Spec(
            gap,
            grace,
            KeyedWindows.emitsFinal(emit),
            "suppress".equals(emit),
            WindowAggregator.of(function, DataTypes.LongType),
            WindowRuns.INPUT);
    return started(new SessionWindowAggregation.Processor(spec, late), store);
  }

  @Test
  void aRecordMergesTheSessionsWithinTheGapAndTheMergedOnesAreTombstoned() {
    var sessions = processor(10, 100, "updates", "count");
    assertEquals(
        List.of("update a 0 0 - @0", "update a 0 5 2 @5"),
        batch(sessions, record("a", 1L, 0, 0), record("a", 1L, 5, 1)));
    assertEquals(
        List.of("update a 30 30 - @30", "update a 20 30 2 @30"),
        batch(sessions, record("a", 1L, 30, 2), record("a", 1L, 20, 3)));
    // 12 is within the gap of both [0, 5] and [20, 30]: one session [0, 30] of five records.
    assertEquals(
        List.of("update a 0 5 - @5", "update a 20 30 - @30", "update a 0 30 5 @30"),
        batch(sessions, record("a", 1L, 12, 4)));
    assertEquals(1, store.size("sessions"));
  }

  @Test
  void mergedAggregatesAreFoldedAsTheRecordsWouldBe() {
    var latest = processor(10, 100, "updates", "latest");
    batch(latest, record("a", 1L, 0, 0), record("a", 2L, 20, 1));
    // 10 arrives last but is not the newest record of the merged session [0, 20]: 20's value stays.
    assertEquals(
        List.of("update a 0 0 - @0", "update a 20 20 - @20", "update a 0 20 2 @20"),
        batch(latest, record("a", 3L, 10, 2)));
  }

  @Test
  void aRecordForAnExpiredSessionIsLateAndMergesNothing() {
    var sessions = processor(10, 0, "updates", "count");
    batch(sessions, record("a", 1L, 0, 0), record("z", 1L, 50, 1));
    // Stream time 50: a@5 would merge [0, 0], which the store no longer returns; alone, its
    // session [5, 5] ended before 50 - 0 - 10.
    assertEquals(List.of("late a 5 5 - @5"), batch(sessions, record("a", 1L, 5, 2)));
    assertEquals(1, late.value());
  }

  @Test
  void aSessionAtTheHorizonIsOverwrittenByANewOneOfTheSameBoundsNotKeptTwice() {
    // Gap 3, grace 5, stream time 8: a@0 is not late ([0, 0] ends at 8 - 5 - 3) but the store no
    // longer returns [0, 0] to the second a@0, whose new [0, 0] replaces it (fuzz seed 10797).
    var sessions = processor(3, 5, "final", "count");
    assertEquals(
        List.of(),
        batch(sessions, record("a", 1L, 8, 0), record("a", 1L, 0, 1), record("a", 1L, 0, 2)));
    assertEquals(
        List.of("final a 0 0 1 @0"), batch(sessions, record("a", 1L, 12, 3)));
  }

  @ParameterizedTest
  @ValueSource(strings = {"final", "suppress"})
  void emitFinalClosesSessionsByEndStartKeyAndSuppressByEndKeyStart(String emit) {
    var sessions = processor(10, 0, emit, "count");
    assertEquals(
        List.of(),
        batch(sessions, record("b", 1L, 0, 0), record("a", 1L, 5, 1), record("b", 1L, 10, 2),
            record("a", 1L, 10, 3)));
    // Both sessions end at 10: emit final closes them once the stream time passes 10 + 0 + 10,
    // suppression's buffer once it reaches it.
    List<String> closing = batch(sessions, record("c", 1L, 20, 4));
    List<String> after = batch(sessions, record("c", 1L, 21, 5));
    assertEquals(
        "final".equals(emit)
            ? List.of(List.of(), List.of("final b 0 10 2 @10", "final a 5 10 2 @10"))
            : List.of(List.of("final a 5 10 2 @10", "final b 0 10 2 @10"), List.of()),
        List.of(closing, after));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2})
  void suppressEmitsAgainASessionOfTheSameBoundsMadeAfterItClosed(int batches) {
    // Gap 3, grace 5: a@8 brings the stream time to 0 + 5 + 3, which closes [0, 0] (count 2) for
    // suppression; the store no longer returns it to a@0 at that stream time, whose new [0, 0]
    // (count 1) replaces it and is emitted too, in whichever batch it comes.
    var sessions = processor(3, 5, "suppress", "count");
    var first = List.of(record("a", 1L, 0, 0), record("a", 1L, 0, 1), record("a", 1L, 8, 2));
    var last = record("a", 1L, 0, 3);
    List<String> out = new ArrayList<>();
    if (batches == 1) {
      var all = new ArrayList<>(first);
      all.add(last);
      out.addAll(batch(sessions, all.toArray(new Row[0])));
    } else {
      out.addAll(batch(sessions, first.toArray(new Row[0])));
      out.addAll(batch(sessions, last));
    }
    assertEquals(List.of("final a 0 0 2 @0", "final a 0 0 1 @0"), out);
  }

  @Test
  void suppressEmitsASessionClosedOnArrival() {
    // Gap 2, grace 0, stream time 10 since the last batch: a@8 is in time ([8, 8] ends at
    // 10 - 0 - 2) and suppression's buffer closes it at once (8 + 0 + 2), as Kafka Streams'
    // does, although no record of this batch moves the stream time (fuzz seed 11265).
    var sessions = processor(2, 0, "suppress", "count");
    assertEquals(List.of(), batch(sessions, record("z", 1L, 10, 0)));
    assertEquals(List.of("final a 8 8 1 @8"), batch(sessions, record("a", 1L, 8, 1)));
    assertEquals(List.of(), batch(sessions, record("z", 1L, 11, 2)));
  }

  @Test
  void collectListCannotMergeSessions() {
    var collect = WindowAggregator.of("collect_list", DataTypes.LongType);
    assertThrows(
        UnsupportedOperationException.class,
        () -> collect.merge(collect.initial(0), collect.initial(1)));
  }
}
