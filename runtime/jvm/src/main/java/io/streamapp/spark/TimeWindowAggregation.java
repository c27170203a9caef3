package io.streamapp.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
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
 * Kafka Streams' tumbling and hopping window aggregation with a declarative aggregator (count,
 * sum, min, max, avg, latest, collect_list), with its state per key and window.
 *
 * <p>The records of a task (an input partition, or after a key change a hash bucket of keys: a
 * repartition topic's partition) are one group of a {@code transformWithState}. The group keeps
 * its stream time and the starts of its open windows in a small value state, and each window's
 * aggregate in a map state keyed by (record key, window start), in the RocksDB state store: a
 * micro-batch reads and writes only the windows its records fall in. The semantics are those of
 * {@code runtime/spark/stateful/windows.py} (which runs user-function aggregators and merged
 * topics): the records of a batch in Kafka Streams' arrival order, the stream time the
 * running maximum of their timestamps, a record dropped from a window (a {@code late} row) once
 * {@code end + grace <= stream time}, one {@code update} row per changed window and batch (last
 * change order) or, with emit final, one {@code final} row per window when the stream time closes
 * it; a closed window's state is removed then (its keys found by one pass over the task's map).
 */
public final class TimeWindowAggregation {
  private TimeWindowAggregation() {}

  /**
   * The aggregation of {@code rows} by task ({@link KeyedWindows#byTask}: its columns in and
   * out). {@code valueType}: the value column's type as JSON; {@code late} (may be null) counts
   * dropped record-window contributions.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      long size,
      long advance,
      long grace,
      String emit,
      String function,
      String valueType,
      String outputSchema,
      LongAccumulator late) {
    StructType input = rows.schema();
    DataType keyType = input.apply("key").dataType();
    DataType value = DataType.fromJson(valueType);
    WindowAggregator aggregator = WindowAggregator.of(function, value);
    Spec spec = new Spec(size, advance, grace, KeyedWindows.emitsFinal(emit), aggregator, keyType, input);
    return KeyedWindows.byTask(rows, new Processor(spec, late), outputSchema);
  }

  /** What every task of one aggregation needs (serialisable: shipped to the executors). */
  static final class Spec implements java.io.Serializable {
    final long size;
    final long advance;
    final long grace;
    final boolean emitFinal;
    final WindowAggregator aggregator;
    final StructType windowKey;
    final StructType slot;
    final KeyedWindows.Columns columns;

    Spec(
        long size,
        long advance,
        long grace,
        boolean emitFinal,
        WindowAggregator aggregator,
        DataType keyType,
        StructType input) {
      this.size = size;
      this.advance = advance;
      this.grace = grace;
      this.emitFinal = emitFinal;
      this.aggregator = aggregator;
      this.windowKey =
          new StructType()
              .add("key", keyType, true)
              .add("start", DataTypes.LongType, false);
      StructType fields = new StructType();
      for (StructField f : aggregator.fields()) {
        fields = fields.add(f);
      }
      this.slot = fields.add("max_ts", DataTypes.LongType, false);
      this.columns = new KeyedWindows.Columns(input);
    }

    /** The stream time at which the window starting at {@code start} closes. */
    long threshold(long start) {
      return start + size + grace;
    }
  }

  static final class Processor extends StatefulProcessor<Integer, Row, Row> {
    private final Spec spec;
    private final LongAccumulator late;
    private transient ValueState<Row> task;
    private transient MapState<Row, Row> windows;

    Processor(Spec spec, LongAccumulator late) {
      this.spec = spec;
      this.late = late;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      StructType taskSchema =
          new StructType()
              .add("stream_time", DataTypes.LongType, true)
              .add("open", DataTypes.createArrayType(DataTypes.LongType, false), false);
      task = getHandle().getValueState("task", Encoders.row(taskSchema), TTLConfig.NONE());
      windows =
          getHandle()
              .getMapState(
                  "windows", Encoders.row(spec.windowKey), Encoders.row(spec.slot), TTLConfig.NONE());
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
        Integer group, scala.collection.Iterator<Row> input, TimerValues timerValues) {
      KeyedWindows.Columns c = spec.columns;
      List<Row> batch = Batches.arrivalOrder(CollectionConverters.asJava(input), c.sub, c.offset, c.ts);
      Row saved = task.exists() ? task.get() : null;
      Long streamTime = saved == null || saved.isNullAt(0) ? null : saved.getLong(0);
      TreeSet<Long> open = new TreeSet<>();
      if (saved != null) {
        open.addAll(saved.getList(1));
      }
      List<Row> out = new ArrayList<>();
      // Windows this batch touched, in the order of their last change (an access-ordered map: a
      // window changed again moves to the end).
      // Sized for a window per record (a tumbling window's case), not grown from small.
      LinkedHashMap<Window, Object[]> touched = new LinkedHashMap<>(Batches.capacity(batch.size()), 0.75f, true);
      WindowAggregator agg = spec.aggregator;
      long lateCount = 0;
      long opened = Long.MIN_VALUE; // the start last added to open (most records open the same)
      for (Row r : batch) {
        long ts = r.getLong(c.ts);
        streamTime = streamTime == null ? ts : Math.max(streamTime, ts);
        Object key = r.get(c.key);
        Object value = r.get(c.value);
        long first = Math.floorDiv(Math.max(0L, ts - spec.size + spec.advance), spec.advance) * spec.advance;
        for (long start = first; start <= ts; start += spec.advance) {
          long end = start + spec.size;
          if (end + spec.grace <= streamTime) {
            out.add(KeyedWindows.row("late", key, start, end, null, ts, r.get(c.partition), r.get(c.offset)));
            lateCount++;
            continue;
          }
          Window id = new Window(key, start);
          Object[] slot = touched.get(id);
          if (slot == null) {
            Row stored = windows.getValue(id.row());
            if (stored == null) {
              slot = agg.initial(ts);
              if (start != opened) {
                open.add(start);
                opened = start;
              }
            } else {
              slot = agg.load(stored);
            }
            touched.put(id, slot);
          }
          agg.add(slot, value, ts);
          int last = slot.length - 1;
          slot[last] = Math.max((Long) slot[last], ts);
        }
      }
      if (lateCount > 0 && late != null) {
        late.add(lateCount);
      }
      for (Map.Entry<Window, Object[]> e : touched.entrySet()) {
        Window id = e.getKey();
        Object[] slot = e.getValue();
        windows.updateValue(id.row(), RowFactory.create(slot));
        if (!spec.emitFinal) {
          out.add(
              KeyedWindows.row("update", id.key, id.start, id.start + spec.size, agg.result(slot), (Long) slot[slot.length - 1], null, null));
        }
      }
      if (streamTime != null && !open.isEmpty() && spec.threshold(open.first()) <= streamTime) {
        out.addAll(close(open, streamTime, agg));
      }
      task.update(RowFactory.create(streamTime, Batches.seq(new ArrayList<Object>(open))));
      return CollectionConverters.asScala(out.iterator());
    }

    /** Remove the windows the stream time closed; with emit final, their results. */
    private List<Row> close(TreeSet<Long> open, long streamTime, WindowAggregator agg) {
      Set<Long> closing = new HashSet<>();
      while (!open.isEmpty() && spec.threshold(open.first()) <= streamTime) {
        closing.add(open.pollFirst());
      }
      List<Row> finals = new ArrayList<>();
      List<Row> gone = new ArrayList<>();
      scala.collection.Iterator<scala.Tuple2<Row, Row>> all = windows.iterator();
      while (all.hasNext()) {
        scala.Tuple2<Row, Row> entry = all.next();
        long start = entry._1().getLong(1);
        if (!closing.contains(start)) {
          continue;
        }
        gone.add(entry._1());
        if (spec.emitFinal) {
          Object[] slot = agg.load(entry._2());
          finals.add(
              KeyedWindows.row("final", entry._1().get(0), start, start + spec.size, agg.result(slot), (Long) slot[slot.length - 1], null, null));
        }
      }
      for (Row id : gone) {
        windows.removeKey(id);
      }
      finals.sort(KeyedWindows.finalOrder(false));
      return finals;
    }
  }

  /** A window of a key: the map state's key, with a cheap hash for the batch's own bookkeeping. */
  static final class Window {
    final Object key;
    final long start;
    private final int hash;
    private Row row;

    Window(Object key, long start) {
      this.key = key;
      this.start = start;
      this.hash = 31 * KeyedWindows.Key.hash(key) + Long.hashCode(start);
    }

    /** The (key, start) row the map state is keyed by (made once). */
    Row row() {
      if (row == null) {
        row = RowFactory.create(key, start);
      }
      return row;
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object other) {
      if (!(other instanceof Window)) {
        return false;
      }
      Window w = (Window) other;
      return start == w.start && KeyedWindows.Key.same(key, w.key);
    }
  }
}
