package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;

import org.apache.spark.sql.Row;

import scala.jdk.javaapi.CollectionConverters;

/**
 * What the window engines ({@link TimeWindowAggregation}, {@link SlidingWindowAggregation},
 * {@link SessionWindowAggregation}) do alike with a task's micro-batch: its records in Kafka
 * Streams' arrival order, the batch's hash maps sized for its records, and the Scala sequences
 * Spark's row encoder takes for the array columns of their state.
 */
final class Batches {
  private Batches() {}

  /** A hash map's initial capacity for {@code entries} entries at the default load factor. */
  static int capacity(int entries) {
    return (int) Math.min(1 << 30, Math.max(16L, entries * 4L / 3 + 1));
  }

  /** A Java list as the Scala sequence Spark's row encoder takes for an array column. */
  static scala.collection.immutable.Seq<Object> seq(List<Object> list) {
    return CollectionConverters.asScala(list).toSeq();
  }

  /**
   * One task's batch in Kafka Streams' order: each source partition ({@code sub}) by offset, and
   * next always the partition whose head record has the lowest timestamp (ties: the lower source
   * id), as {@code engine.arrival_order} does.
   */
  static List<Row> arrivalOrder(Iterator<Row> input, int sub, int offset, int ts) {
    List<Row> rows = new ArrayList<>();
    input.forEachRemaining(rows::add);
    if (!ordered(rows, sub, offset)) {
      rows.sort(
          Comparator.<Row>comparingLong(r -> r.getLong(sub)).thenComparingLong(r -> r.getLong(offset)));
    }
    if (rows.isEmpty() || rows.get(0).getLong(sub) == rows.get(rows.size() - 1).getLong(sub)) {
      return rows;
    }
    List<int[]> runs = new ArrayList<>();
    int begin = 0;
    for (int i = 1; i <= rows.size(); i++) {
      if (i == rows.size() || rows.get(i).getLong(sub) != rows.get(i - 1).getLong(sub)) {
        runs.add(new int[] {begin, i});
        begin = i;
      }
    }
    // Heads as (ts, sub, index, end): the smallest timestamp first, then the smaller source id.
    PriorityQueue<long[]> heads =
        new PriorityQueue<>(
            Comparator.<long[]>comparingLong(h -> h[0]).thenComparingLong(h -> h[1]).thenComparingLong(h -> h[2]));
    for (int[] run : runs) {
      Row head = rows.get(run[0]);
      heads.add(new long[] {head.getLong(ts), head.getLong(sub), run[0], run[1]});
    }
    List<Row> ordered = new ArrayList<>(rows.size());
    while (!heads.isEmpty()) {
      long[] h = heads.poll();
      int i = (int) h[2];
      ordered.add(rows.get(i));
      if (i + 1 < h[3]) {
        Row next = rows.get(i + 1);
        heads.add(new long[] {next.getLong(ts), h[1], i + 1, h[3]});
      }
    }
    return ordered;
  }

  /** Whether {@code rows} are already by source partition, then offset (a task's rows usually are). */
  private static boolean ordered(List<Row> rows, int sub, int offset) {
    for (int i = 1; i < rows.size(); i++) {
      Row a = rows.get(i - 1);
      Row b = rows.get(i);
      long sa = a.getLong(sub);
      long sb = b.getLong(sub);
      if (sa > sb || sa == sb && a.getLong(offset) > b.getLong(offset)) {
        return false;
      }
    }
    return true;
  }
}
