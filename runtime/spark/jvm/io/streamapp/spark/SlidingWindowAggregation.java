package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
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
 * grace}, by end, start, key. Windows are listed by the time bucket of their start in a ring of
 * list states (as {@link SessionWindowAggregation}'s ends), to close and forget them without
 * reading the whole task.
 */
public final class SlidingWindowAggregation {
  private SlidingWindowAggregation() {}

  static final int RING = 8;

  /**
   * The aggregation of {@code rows} (columns key, value, ts, partition, offset, sub, task_key)
   * grouped by {@code task_key}; rows out as {@link TimeWindowAggregation#apply}'s.
   * {@code difference}: the windows' time difference d.
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
    StructType input = rows.schema();
    StructType output = StructType.fromDDL(outputSchema);
    DataType keyType = input.apply("key").dataType();
    TimeWindowAggregation.Aggregator aggregator =
        TimeWindowAggregation.Aggregator.of(function, DataType.fromJson(valueType));
    Spec spec = new Spec(difference, grace, "final".equals(emit), aggregator, keyType, input);
    return rows.groupBy(functions.coalesce(functions.col("task_key"), functions.lit(0)).as("value"))
        .as(Encoders.INT(), Encoders.row(input))
        .transformWithState(
            new Processor(spec, late), TimeMode.None(), OutputMode.Append(), Encoders.row(output));
  }

  static final class Spec implements java.io.Serializable {
    final long d;
    final long grace;
    final long retention;
    final boolean emitFinal;
    final TimeWindowAggregation.Aggregator aggregator;
    final StructType keyRow;
    final StructType windows;
    final long width;
    final int key;
    final int value;
    final int ts;
    final int partition;
    final int offset;
    final int sub;

    Spec(
        long d,
        long grace,
        boolean emitFinal,
        TimeWindowAggregation.Aggregator aggregator,
        DataType keyType,
        StructType input) {
      this.d = d;
      this.grace = grace;
      this.retention = 2 * d + grace;
      this.emitFinal = emitFinal;
      this.aggregator = aggregator;
      this.keyRow = new StructType().add("key", keyType, true);
      StructType window = new StructType().add("start", DataTypes.LongType, false);
      for (StructField f : aggregator.fields()) {
        window = window.add(f);
      }
      window = window.add("max_ts", DataTypes.LongType, false);
      this.windows = new StructType().add("windows", DataTypes.createArrayType(window, false), false);
      // A window is found for retention ms of starts, and closes d + grace after its start: the
      // starts alive after a batch span about retention + 1 (+ the latest start's lead of 1 ms).
      long kept = retention + 2;
      this.width = Math.max(1L, (kept + RING - 4) / (RING - 3));
      this.key = input.fieldIndex("key");
      this.value = input.fieldIndex("value");
      this.ts = input.fieldIndex("ts");
      this.partition = input.fieldIndex("partition");
      this.offset = input.fieldIndex("offset");
      this.sub = input.fieldIndex("sub");
    }

    long bucket(long start) {
      return Math.floorDiv(start, width);
    }

    int slot(long bucket) {
      return (int) Math.floorMod(bucket, (long) RING);
    }

    /** The stream time at which the window starting at {@code start} closes (its end included). */
    long threshold(long start) {
      return start + d + grace + 1;
    }
  }

  static final class Processor extends StatefulProcessor<Integer, Row, Row> {
    private final Spec spec;
    private final LongAccumulator late;
    private transient ValueState<Row> task;
    private transient MapState<Row, Row> windows;
    private transient List<ListState<Row>> ring;

    Processor(Spec spec, LongAccumulator late) {
      this.spec = spec;
      this.late = late;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      StructType taskSchema =
          new StructType()
              .add("stream_time", DataTypes.LongType, true)
              .add("latest", DataTypes.LongType, true)
              .add("buckets", DataTypes.createArrayType(DataTypes.LongType, false), false);
      task = getHandle().getValueState("task", Encoders.row(taskSchema), TTLConfig.NONE());
      windows =
          getHandle()
              .getMapState(
                  "windows", Encoders.row(spec.keyRow), Encoders.row(spec.windows), TTLConfig.NONE());
      ring = new ArrayList<>(RING);
      for (int i = 0; i < RING; i++) {
        ring.add(getHandle().getListState("starts" + i, Encoders.row(spec.keyRow), TTLConfig.NONE()));
      }
    }

    /** One batch's view of the task's windows: each key read once, written once. */
    private final class Batch {
      final Map<SessionWindowAggregation.Key, TreeMap<Long, Object[]>> keys = new HashMap<>();
      final Set<SessionWindowAggregation.Key> dirty = new LinkedHashSet<>();

      TreeMap<Long, Object[]> of(SessionWindowAggregation.Key k) {
        TreeMap<Long, Object[]> found = keys.get(k);
        if (found == null) {
          found = new TreeMap<>();
          Row stored = windows.getValue(k.row());
          if (stored != null) {
            for (Row w : stored.<Row>getList(0)) {
              Object[] slot = new Object[w.size() - 1];
              for (int i = 0; i < slot.length; i++) {
                slot[i] = w.get(i + 1);
              }
              found.put(w.getLong(0), slot);
            }
          }
          keys.put(k, found);
        }
        return found;
      }

      void write() {
        for (SessionWindowAggregation.Key k : dirty) {
          TreeMap<Long, Object[]> found = keys.get(k);
          if (found.isEmpty()) {
            windows.removeKey(k.row());
            continue;
          }
          List<Object> rows = new ArrayList<>(found.size());
          for (Map.Entry<Long, Object[]> e : found.entrySet()) {
            Object[] slot = e.getValue();
            Object[] fields = new Object[slot.length + 1];
            fields[0] = e.getKey();
            System.arraycopy(slot, 0, fields, 1, slot.length);
            rows.add(RowFactory.create(fields));
          }
          windows.updateValue(k.row(), RowFactory.create(TimeWindowAggregation.seq(rows)));
        }
        dirty.clear();
      }
    }

    /** What one record does: the running state of the task in the batch. */
    private final class Step {
      final Batch batch = new Batch();
      final Set<SessionWindowAggregation.Listed> listed = new HashSet<>();
      final TreeSet<Long> buckets;
      final LinkedHashMap<SessionWindowAggregation.Span, Object[]> changed =
          new LinkedHashMap<>(1024, 0.75f, true);
      Long latest;

      Step(TreeSet<Long> buckets, Long latest) {
        this.buckets = buckets;
        this.latest = latest;
      }

      /** Write a window (the store's put): the batch's changelog, the ring, the latest start. */
      void put(SessionWindowAggregation.Key k, long start, Object[] slot) {
        TreeMap<Long, Object[]> found = batch.of(k);
        boolean known = found.containsKey(start);
        found.put(start, slot);
        batch.dirty.add(k);
        if (!spec.emitFinal) {
          changed.put(new SessionWindowAggregation.Span(k, start, start + spec.d), slot);
        }
        long bucket = spec.bucket(start);
        if (!known && listed.add(new SessionWindowAggregation.Listed(k, bucket))) {
          ring.get(spec.slot(bucket)).appendValue(k.row());
          buckets.add(bucket);
        }
        if (latest == null || start > latest) {
          latest = start;
        }
      }
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
        Integer group, scala.collection.Iterator<Row> input, TimerValues timerValues) {
      List<Row> records =
          TimeWindowAggregation.arrivalOrder(
              CollectionConverters.asJava(input), spec.sub, spec.offset, spec.ts);
      Row saved = task.exists() ? task.get() : null;
      Long streamTime = saved == null || saved.isNullAt(0) ? null : saved.getLong(0);
      Long latest = saved == null || saved.isNullAt(1) ? null : saved.getLong(1);
      long before = streamTime == null ? Long.MIN_VALUE : streamTime;
      TreeSet<Long> buckets = new TreeSet<>();
      if (saved != null) {
        buckets.addAll(saved.getList(2));
      }
      Step step = new Step(buckets, latest);
      List<Row> out = new ArrayList<>();
      long lateCount = 0;
      for (Row r : records) {
        long ts = r.getLong(spec.ts);
        streamTime = streamTime == null ? ts : Math.max(streamTime, ts);
        SessionWindowAggregation.Key k = new SessionWindowAggregation.Key(r.get(spec.key));
        for (long start : process(step, k, r.get(spec.value), ts, streamTime)) {
          out.add(row("late", k.key, start, start + spec.d, null, ts, r.get(spec.partition), r.get(spec.offset)));
          lateCount++;
        }
      }
      if (lateCount > 0 && late != null) {
        late.add(lateCount);
      }
      TimeWindowAggregation.Aggregator agg = spec.aggregator;
      for (Map.Entry<SessionWindowAggregation.Span, Object[]> e : step.changed.entrySet()) {
        SessionWindowAggregation.Span s = e.getKey();
        Object[] slot = e.getValue();
        out.add(row("update", s.key().key, s.start(), s.end(), agg.result(slot), (Long) slot[slot.length - 1], null, null));
      }
      if (streamTime != null) {
        if (spec.emitFinal) {
          out.addAll(close(step.batch, buckets, before, streamTime));
        }
        forget(step.batch, buckets, streamTime, step.latest);
      }
      step.batch.write();
      task.update(
          RowFactory.create(
              streamTime, step.latest, TimeWindowAggregation.seq(new ArrayList<Object>(buckets))));
      return CollectionConverters.asScala(out.iterator());
    }

    /**
     * Fold the record at {@code ts} into its key's windows ({@code windows.py}'s
     * {@code _SlidingStore.process}); returns the starts of the closed windows it was dropped from.
     */
    private List<Long> process(Step step, SessionWindowAggregation.Key k, Object value, long ts, long streamTime) {
      long d = spec.d;
      long close = streamTime - spec.grace;
      List<Long> drops = new ArrayList<>();
      if (ts + d < close) {
        drops.add(ts - d);
        return drops;
      }
      TimeWindowAggregation.Aggregator agg = spec.aggregator;
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
        Step step, SessionWindowAggregation.Key k, long start, Object[] slot, Object value, long ts, long close,
        List<Long> drops) {
      if (start + spec.d < close) {
        drops.add(start);
        return;
      }
      TimeWindowAggregation.Aggregator agg = spec.aggregator;
      Object[] next = slot == null ? agg.initial(ts) : slot.clone();
      agg.add(next, value, ts);
      int last = next.length - 1;
      next[last] = Math.max(ts, (Long) next[last]);
      step.put(k, start, next);
    }

    private Set<SessionWindowAggregation.Key> listedIn(int slot) {
      Set<SessionWindowAggregation.Key> keys = new LinkedHashSet<>();
      scala.collection.Iterator<Row> it = ring.get(slot).get();
      while (it.hasNext()) {
        keys.add(new SessionWindowAggregation.Key(it.next().get(0)));
      }
      return keys;
    }

    /** Windows the stream time closed since {@code before}, by end, start, key. */
    private List<Row> close(Batch batch, TreeSet<Long> buckets, long before, long now) {
      // Starts s with before < threshold(s) <= now.
      long low = before == Long.MIN_VALUE ? Long.MIN_VALUE : before - spec.d - spec.grace;
      long high = now - spec.d - spec.grace - 1;
      List<Row> out = new ArrayList<>();
      if (high < low) {
        return out;
      }
      Set<Integer> slots = new TreeSet<>();
      for (long b : buckets) {
        long first = b * spec.width;
        if (first + spec.width - 1 >= low && first <= high) {
          slots.add(spec.slot(b));
        }
      }
      TimeWindowAggregation.Aggregator agg = spec.aggregator;
      Set<SessionWindowAggregation.Key> seen = new HashSet<>();
      for (int slot : slots) {
        for (SessionWindowAggregation.Key k : listedIn(slot)) {
          if (!seen.add(k)) {
            continue;
          }
          for (Map.Entry<Long, Object[]> e : batch.of(k).subMap(low, true, high, true).entrySet()) {
            Object[] s = e.getValue();
            long start = e.getKey();
            out.add(row("final", k.key, start, start + spec.d, agg.result(s), (Long) s[s.length - 1], null, null));
          }
        }
      }
      out.sort(
          Comparator.<Row>comparingLong(f -> f.getLong(3))
              .thenComparingLong(f -> f.getLong(2))
              .thenComparing(f -> String.valueOf(f.get(1))));
      return out;
    }

    /**
     * Forget windows no record can find any more (start before the latest start - retention + 1)
     * once closed: the buckets wholly before both are read and cleared (a key with a window left
     * in the same slot is listed again).
     */
    private void forget(Batch batch, TreeSet<Long> buckets, long now, Long latest) {
      if (latest == null) {
        return;
      }
      long horizon = Math.min(latest - spec.retention + 1, now - spec.d - spec.grace);
      Set<Integer> slots = new TreeSet<>();
      while (!buckets.isEmpty() && (buckets.first() + 1) * spec.width - 1 < horizon) {
        slots.add(spec.slot(buckets.pollFirst()));
      }
      for (int slot : slots) {
        List<Row> keep = new ArrayList<>();
        for (SessionWindowAggregation.Key k : listedIn(slot)) {
          TreeMap<Long, Object[]> mine = batch.of(k);
          if (!mine.headMap(horizon, false).isEmpty()) {
            mine.headMap(horizon, false).clear();
            batch.dirty.add(k);
          }
          boolean again = false;
          for (long start : mine.keySet()) {
            if (spec.slot(spec.bucket(start)) == slot) {
              again = true;
              break;
            }
          }
          if (again) {
            keep.add(k.row());
          }
        }
        ring.get(slot).clear();
        if (!keep.isEmpty()) {
          ring.get(slot).put(keep.toArray(new Row[0]));
        }
      }
    }
  }

  private static Row row(
      String kind, Object key, long start, long end, Object value, long ts, Object partition, Object offset) {
    return RowFactory.create(kind, key, start, end, value, ts, partition, offset);
  }
}
