package io.streamapp.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import io.streamapp.spark.KeyedWindows.Key;
import io.streamapp.spark.KeyedWindows.Span;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Kafka Streams' sliding window aggregation (KStreamSlidingWindowAggregate) with a declarative
 * aggregator, with its state per key.
 *
 * <p>The records of a task are one group of a {@code transformWithState}, as in {@link
 * TimeWindowAggregation}; a map state holds each record key's windows (start → aggregate and max
 * timestamp) in RocksDB. The algorithm is {@code windows.py}'s {@code _SlidingStore} step by step
 * (its docstring says why a window's result is not a function of its records alone): a record's
 * left window {@code [ts - d, ts]} starts from the window found just before it, the windows
 * containing it are updated, the previous record's right window is created, and its own right
 * window {@code [ts + 1, ts + 1 + d]} is a copy of the latest window containing it. A window is
 * found while its start is at least {@code 2 d + grace} before the latest start the task ever
 * wrote; an update of a window closed at the record's stream time ({@code end + grace <} stream
 * time) drops the record ({@code late}). Emit updates: one row per changed window and batch, in the
 * order of last change; emit final: one row per window once the stream time passes {@code end +
 * grace}, by end, start, key. Windows are listed by the time bucket of their start ({@link
 * KeyListing}), to close and forget them without reading the whole task.
 */
public final class SlidingWindowAggregation {
  private SlidingWindowAggregation() {}

  /**
   * The aggregation of {@code rows} by task ({@link KeyedWindows#byTask}); {@code difference}:
   * the windows' time difference d.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      long difference,
      long grace,
      String emit,
      String function,
      String valueType,
      String outputSchema,
      LongAccumulator late) {
    WindowAggregator aggregator =
        WindowAggregator.of(function, DataType.fromJson(valueType));
    Spec spec =
        new Spec(difference, grace, KeyedWindows.emitsFinal(emit), aggregator, rows.schema());
    return KeyedWindows.byTask(rows, new Processor(spec, late), outputSchema);
  }

  static final class Spec implements java.io.Serializable {
    final long d;
    final long grace;
    final long retention;
    final boolean emitFinal;
    final WindowAggregator aggregator;
    final KeyedWindows.Columns columns;
    final StructType windows;
    /** The longest time, in ms, from a window's start to its forgetting. */
    final long span;

    Spec(
        long d,
        long grace,
        boolean emitFinal,
        WindowAggregator aggregator,
        StructType input) {
      this.d = d;
      this.grace = grace;
      this.retention = 2 * d + grace;
      this.emitFinal = emitFinal;
      this.aggregator = aggregator;
      this.columns = new KeyedWindows.Columns(input);
      this.windows = KeyedWindows.windows("windows", List.of("start"), aggregator);
      // Listed by its start, a window is found for retention ms of starts and closes d + grace
      // after its start; the latest start leads the stream time by at most 1 ms.
      this.span = retention + 2;
    }
  }

  /** A batch's view of the keys' windows (start → aggregate slot). */
  static final class Windows extends KeyedWindows.Keys<TreeMap<Long, Object[]>> {
    Windows(MapState<Row, Row> state, int records) {
      super(state, records);
    }

    @Override
    TreeMap<Long, Object[]> load(Row stored) {
      TreeMap<Long, Object[]> found = new TreeMap<>();
      if (stored != null) {
        for (Row w : stored.<Row>getList(0)) {
          found.put(w.getLong(0), KeyedWindows.slot(w, 1));
        }
      }
      return found;
    }

    @Override
    List<Object> rows(TreeMap<Long, Object[]> windows) {
      List<Object> rows = new ArrayList<>(windows.size());
      for (Map.Entry<Long, Object[]> e : windows.entrySet()) {
        rows.add(KeyedWindows.window(e.getValue(), e.getKey()));
      }
      return rows;
    }
  }

  static final class Processor extends KeyedWindows.ListedProcessor {
    private final Spec spec;

    Processor(Spec spec, LongAccumulator late) {
      super(late, spec.columns.keyRow, "windows", spec.windows, "starts", spec.span, "latest");
      this.spec = spec;
    }

    /** The task's running state in a batch: its keys' windows, changelog and latest start. */
    private final class Step {
      final Windows batch;
      final LinkedHashMap<Span, Object[]> changed;
      Long latest;

      Step(Long latest, int records) {
        this.latest = latest;
        this.batch = new Windows(state, records);
        this.changed = new LinkedHashMap<>(Batches.capacity(records), 0.75f, true);
      }

      /** Write a window (the store's put): the batch's changelog, the listing, the latest start. */
      void put(Key k, long start, Object[] slot) {
        if (batch.of(k).put(start, slot) == null) {
          listing.list(k, start);
        }
        batch.changed(k);
        if (!spec.emitFinal) {
          changed.put(new Span(k, start, start + spec.d), slot);
        }
        if (latest == null || start > latest) {
          latest = start;
        }
      }
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
        Integer group, scala.collection.Iterator<Row> input, TimerValues timerValues) {
      KeyedWindows.Columns c = spec.columns;
      List<Row> records =
          Batches.arrivalOrder(CollectionConverters.asJava(input), c.sub, c.offset, c.ts);
      Row saved = begin();
      Long streamTime = field(saved, 0);
      // Windows closing at a stream time up to this one were emitted by an earlier batch.
      long before = streamTime == null ? Long.MIN_VALUE : streamTime;
      Step step = new Step(field(saved, 1), records.size());
      List<Row> out = new ArrayList<>();
      long lateCount = 0;
      for (Row r : records) {
        long ts = r.getLong(c.ts);
        streamTime = streamTime == null ? ts : Math.max(streamTime, ts);
        Key k = new Key(r.get(c.key));
        for (long start : process(step, k, r.get(c.value), ts, streamTime)) {
          out.add(
              KeyedWindows.row("late", k.key, start, start + spec.d, null, ts, r.get(c.partition), r.get(c.offset)));
          lateCount++;
        }
      }
      countLate(lateCount);
      WindowAggregator agg = spec.aggregator;
      for (Map.Entry<Span, Object[]> e : step.changed.entrySet()) {
        Span s = e.getKey();
        Object[] slot = e.getValue();
        long maxTs = (Long) slot[slot.length - 1];
        out.add(KeyedWindows.row("update", s.key().key, s.start(), s.end(), agg.result(slot), maxTs, null, null));
      }
      if (streamTime != null) {
        if (spec.emitFinal) {
          out.addAll(close(step.batch, before, streamTime));
        }
        forget(step.batch, streamTime, step.latest);
      }
      step.batch.write();
      end(streamTime, step.latest);
      return CollectionConverters.asScala(out.iterator());
    }
    /**
     * Fold the record at {@code ts} into its key's windows ({@code windows.py}'s
     * {@code _SlidingStore.process}); returns the starts of the closed windows it was dropped from.
     */
    private List<Long> process(Step step, Key k, Object value, long ts, long streamTime) {
      long d = spec.d;
      long close = streamTime - spec.grace;
      List<Long> drops = new ArrayList<>();
      if (ts + d < close) {
        drops.add(ts - d);
        return drops;
      }
      WindowAggregator agg = spec.aggregator;
      long low = step.latest == null ? ts - 2 * d : Math.max(ts - 2 * d, step.latest - spec.retention + 1);
      TreeMap<Long, Object[]> mine = step.batch.of(k);
      // Newest first, as the store's reverse iterator; a snapshot (updates write into `mine`).
      List<Map.Entry<Long, Object[]>> found =
          new ArrayList<>(mine.subMap(low, true, ts + 1, true).descendingMap().entrySet());
      Set<Long> starts = new HashSet<>();
      Object[] right = null;
      Object[] left = null;
      boolean leftCreated = false;
      boolean rightCreated = false;
      Long previous = null;
      for (Map.Entry<Long, Object[]> e : found) {
        long start = e.getKey();
        Object[] slot = e.getValue();
        starts.add(start);
        long end = start + d;
        if (start == ts + 1) {
          rightCreated = true;
        } else if (end > ts) {
          if (right == null) {
            right = slot.clone(); // as it was before this record
          }
          update(step, k, start, slot, value, ts, close, drops);
        } else if (end == ts) {
          leftCreated = true;
          update(step, k, start, slot, value, ts, close, drops);
          long maxTs = (Long) slot[slot.length - 1];
          if (maxTs < ts) {
            previous = maxTs;
          } else {
            return drops;
          }
        } else {
          left = slot;
          previous = (Long) slot[slot.length - 1];
          break;
        }
      }
      if (previous != null && !starts.contains(previous + 1) && previous + 1 + d >= ts) {
        update(step, k, previous + 1, null, value, ts, close, drops); // the previous record's right window
      }
      if (!leftCreated) {
        if (previous != null && left != null && ts - d <= previous) {
          Object[] from = left.clone(); // starts from the window before it
          from[from.length - 1] = ts;
          update(step, k, ts - d, from, value, ts, close, drops);
        } else {
          update(step, k, ts - d, null, value, ts, close, drops);
        }
      }
      if (!rightCreated && right != null && (Long) right[right.length - 1] > ts) {
        step.put(k, ts + 1, right); // a copy, written closed or not
      }
      return drops;
    }

    /** updateWindowAndForward: {@code slot} null for a new window (the initializer). */
    private void update(
        Step step, Key k, long start, Object[] slot, Object value, long ts, long close,
        List<Long> drops) {
      if (start + spec.d < close) {
        drops.add(start);
        return;
      }
      WindowAggregator agg = spec.aggregator;
      Object[] next = slot == null ? agg.initial(ts) : slot.clone();
      agg.add(next, value, ts);
      int last = next.length - 1;
      next[last] = Math.max(ts, (Long) next[last]);
      step.put(k, start, next);
    }

    /** Windows the stream time closed since {@code before}, by end, start, key. */
    private List<Row> close(Windows batch, long before, long now) {
      // Starts s with before < threshold(s) = s + d + grace + 1 <= now.
      long low = before == Long.MIN_VALUE ? Long.MIN_VALUE : before - spec.d - spec.grace;
      long high = now - spec.d - spec.grace - 1;
      List<Row> out = new ArrayList<>();
      if (high < low) {
        return out;
      }
      WindowAggregator agg = spec.aggregator;
      Set<Key> seen = new HashSet<>();
      for (long bucket : listing.overlapping(low, high)) {
        for (Key k : listing.keys(bucket)) {
          if (!seen.add(k)) {
            continue;
          }
          for (Map.Entry<Long, Object[]> e : batch.of(k).subMap(low, true, high, true).entrySet()) {
            Object[] s = e.getValue();
            long start = e.getKey();
            long maxTs = (Long) s[s.length - 1];
            out.add(KeyedWindows.row("final", k.key, start, start + spec.d, agg.result(s), maxTs, null, null));
          }
        }
      }
      out.sort(KeyedWindows.finalOrder(false));
      return out;
    }

    /**
     * Forget windows no record can find any more (start before the latest start - retention + 1)
     * once closed: the buckets wholly before both are read (and leave the listing), and their
     * keys' old windows dropped.
     */
    private void forget(Windows batch, long now, Long latest) {
      if (latest == null) {
        return;
      }
      long horizon = Math.min(latest - spec.retention + 1, now - spec.d - spec.grace);
      for (long bucket : listing.before(horizon)) {
        for (Key k : listing.keys(bucket)) {
          Map<Long, Object[]> old = batch.of(k).headMap(horizon, false);
          if (!old.isEmpty()) {
            old.clear();
            batch.changed(k);
          }
        }
      }
    }
  }
}
