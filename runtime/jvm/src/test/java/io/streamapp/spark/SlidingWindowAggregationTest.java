package io.streamapp.spark;

import static io.streamapp.spark.WindowRuns.batch;
import static io.streamapp.spark.WindowRuns.record;
import static io.streamapp.spark.WindowRuns.started;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.Test;

/** Kafka Streams' sliding windows: left and right windows, out-of-order records, late drops. */
class SlidingWindowAggregationTest {
  private final StateStore store = new StateStore();
  private final LongAccumulator late = new LongAccumulator();

  private SlidingWindowAggregation.Processor processor(long d, long grace, boolean emitFinal) {
    SlidingWindowAggregation.Spec spec =
        new SlidingWindowAggregation.Spec(
            d,
            grace,
            emitFinal,
            WindowAggregator.of("count", DataTypes.LongType),
            WindowRuns.INPUT);
    return started(new SlidingWindowAggregation.Processor(spec, late), store);
  }

  @Test
  void eachRecordHasALeftWindowAndThePreviousRecordARightWindowThatHoldsIt() {
    var windows = processor(10, 100, false);
    assertEquals(List.of("update a 0 10 1 @10"), batch(windows, record("a", 1L, 10, 0)));
    // 15: its left window [5, 15] holds 10 and 15; 10's right window [11, 21] holds 15 alone.
    assertEquals(
        List.of("update a 11 21 1 @15", "update a 5 15 2 @15"),
        batch(windows, record("a", 1L, 15, 1)));
    // 12, out of order: it joins every window that holds it, gets its left window [2, 12] (10 and
    // 12) and its right window [13, 23], a copy of the latest window that holds it without it (15).
    assertEquals(
        List.of("update a 11 21 2 @15", "update a 5 15 3 @15", "update a 2 12 2 @12", "update a 13 23 1 @15"),
        batch(windows, record("a", 1L, 12, 2)));
    assertEquals(0, late.value());
  }

  @Test
  void aRecordWhoseWindowsAllClosedIsDroppedAsLate() {
    var windows = processor(10, 0, false);
    batch(windows, record("a", 1L, 10, 0), record("b", 1L, 30, 1));
    // Stream time 30, no grace: a@15's left window [5, 15] closed at 15 < 30.
    assertEquals(List.of("late a 5 15 - @15"), batch(windows, record("a", 1L, 15, 2)));
    assertEquals(1, late.value());
  }

  @Test
  void emitFinalEmitsAWindowOnceItsEndPlusGraceHasPassed() {
    var windows = processor(10, 5, true);
    assertEquals(List.of(), batch(windows, record("a", 1L, 10, 0), record("a", 1L, 15, 1)));
    // [0, 10] closes once the stream time passes 10 + 5; [5, 15] and [11, 21] stay open.
    assertEquals(List.of("final a 0 10 1 @10"), batch(windows, record("b", 1L, 16, 2)));
    assertEquals(
        List.of("final a 5 15 2 @15", "final b 6 16 1 @16", "final a 11 21 1 @15"),
        batch(windows, record("b", 1L, 30, 3)));
  }

  /**
   * In order, every window Kafka Streams keeps holds exactly the records in its bounds: the left
   * window {@code [t - d, t]} of every record and the right window {@code [t + 1, t + 1 + d]} of
   * every record that a later one falls in. Random records of three keys over several batches.
   */
  @Test
  void inOrderWindowsHoldTheirRecordsWhateverTheBatches() {
    long d = 7;
    var windows = processor(d, 1000, false);
    Random random = new Random(49);
    Map<String, List<Long>> records = new TreeMap<>();
    Map<String, Long> latest = new TreeMap<>(); // key and window start → count, from the updates
    long t = 100;
    for (int b = 0; b < 12; b++) {
      List<Row> rows = new ArrayList<>();
      for (int i = random.nextInt(6); i > 0; i--) {
        t += 1 + random.nextInt(9);
        String key = "k" + random.nextInt(3);
        records.computeIfAbsent(key, k -> new ArrayList<>()).add(t);
        rows.add(record(key, 1L, t, rows.size()));
      }
      for (String line : batch(windows, rows.toArray(new Row[0]))) {
        String[] f = line.split(" ");
        latest.put(f[1] + " " + f[2] + " " + f[3], Long.parseLong(f[4]));
      }
    }
    Map<String, Long> expected = new TreeMap<>();
    for (Map.Entry<String, List<Long>> e : records.entrySet()) {
      List<Long> ts = e.getValue();
      for (int i = 0; i < ts.size(); i++) {
        long r = ts.get(i);
        expected.put(e.getKey() + " " + (r - d) + " " + r, count(ts, r - d, r));
        if (i + 1 < ts.size() && ts.get(i + 1) <= r + 1 + d) {
          expected.put(e.getKey() + " " + (r + 1) + " " + (r + 1 + d), count(ts, r + 1, r + 1 + d));
        }
      }
    }
    assertEquals(expected, latest);
  }

  private static long count(List<Long> ts, long start, long end) {
    return ts.stream().filter(x -> x >= start && x <= end).count();
  }
}
