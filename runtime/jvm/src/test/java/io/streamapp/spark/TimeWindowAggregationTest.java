package io.streamapp.spark;

import static io.streamapp.spark.WindowRuns.batch;
import static io.streamapp.spark.WindowRuns.record;
import static io.streamapp.spark.WindowRuns.started;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.Test;

/** Tumbling and hopping windows: grace, late drops, closing, emit final's order, arrival order. */
class TimeWindowAggregationTest {
  private final StateStore store = new StateStore();
  private final LongAccumulator late = new LongAccumulator();

  private TimeWindowAggregation.Processor processor(
      long size, long advance, long grace, boolean emitFinal, String function) {
    TimeWindowAggregation.Spec spec =
        new TimeWindowAggregation.Spec(
            size,
            advance,
            grace,
            emitFinal,
            WindowAggregator.of(function, DataTypes.LongType),
            DataTypes.BinaryType,
            WindowRuns.INPUT);
    return started(new TimeWindowAggregation.Processor(spec, late), store);
  }

  @Test
  void tumblingUpdatesAcceptRecordsWithinGraceAndDropThemAtEndPlusGrace() {
    var windows = processor(10, 10, 5, false, "count");
    assertEquals(
        List.of("update a 0 10 2 @4", "update b 10 20 1 @12"),
        batch(windows, record("a", 1L, 1, 0), record("a", 1L, 4, 1), record("b", 1L, 12, 2)));
    // Stream time 12: [0, 10) closes at 10 + 5 = 15; a@3 is out of order but within grace. At
    // stream time 15, a@9 is late for it: dropped, named, counted.
    assertEquals(
        List.of("late a 0 10 - @9", "update a 0 10 3 @4", "update b 10 20 2 @15"),
        batch(windows, record("a", 1L, 3, 3), record("b", 1L, 15, 4), record("a", 1L, 9, 5)));
    assertEquals(1, late.value());
  }

  @Test
  void aClosedWindowIsForgottenAndARestartKeepsTheStreamTime() {
    var windows = processor(10, 10, 0, false, "sum");
    batch(windows, record("a", 5L, 1, 0), record("a", 7L, 12, 1));
    // Stream time 12 closed [0, 10): its state went, [10, 20) stays.
    assertEquals(1, store.size("windows"));
    var restarted = processor(10, 10, 0, false, "sum");
    assertEquals(
        List.of("late a 0 10 - @2", "update a 10 20 10 @13"),
        batch(restarted, record("a", 100L, 2, 2), record("a", 3L, 13, 3)));
    assertEquals(1, late.value());
  }

  @Test
  void hoppingRecordsFallInEveryWindowThatHoldsThemFromTimeZero() {
    var windows = processor(10, 5, 100, false, "count");
    // a@7 is in [0, 10) and [5, 15); b@3 only in [0, 10): no window starts before 0.
    assertEquals(
        List.of("update a 0 10 1 @7", "update a 5 15 1 @7", "update b 0 10 1 @3"),
        batch(windows, record("a", 1L, 7, 0), record("b", 1L, 3, 1)));
  }

  @Test
  void emitFinalEmitsEachWindowOnceWhenItClosesByEndStartAndKeyBytes() {
    var windows = processor(10, 5, 0, true, "count");
    assertEquals(List.of(), batch(windows, record("é", 1L, 7, 0), record("z", 1L, 3, 1)));
    // Stream time 10 closes [0, 10): by key in unsigned byte order, z (0x7a) before é (0xc3).
    assertEquals(
        List.of("final z 0 10 1 @3", "final é 0 10 1 @7"),
        batch(windows, record("c", 1L, 10, 2)));
    // Stream time 20 closes [5, 15) and [10, 20): by end, then start, then key.
    assertEquals(
        List.of("final c 5 15 1 @10", "final é 5 15 1 @7", "final c 10 20 1 @10"),
        batch(windows, record("d", 1L, 20, 3)));
    assertEquals(2, store.size("windows")); // d's [15, 25) and [20, 30)
    assertEquals(0, late.value());
  }

  @Test
  void aBatchIsTakenInArrivalOrderNotAsItCame() {
    var windows = processor(10, 10, 0, false, "count");
    // Partition 1's records first as Spark hands them over; Kafka Streams takes the partition
    // whose head is oldest next: 5 (p0), 10, 12 (p1), 20 (p0). Taken as they came, 5 would be
    // late at stream time 12.
    assertEquals(
        List.of("update k 0 10 1 @5", "update k 10 20 2 @12", "update k 20 30 1 @20"),
        batch(
            windows,
            record("k", 1L, 10, 1, 0),
            record("k", 1L, 12, 1, 1),
            record("k", 1L, 5, 0, 0),
            record("k", 1L, 20, 0, 1)));
    assertEquals(0, late.value());
  }
}
