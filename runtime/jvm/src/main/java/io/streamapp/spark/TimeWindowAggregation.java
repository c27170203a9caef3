package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
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
    Aggregator aggregator = Aggregator.of(function, value);
    Spec spec = new Spec(size, advance, grace, KeyedWindows.emitsFinal(emit), aggregator, keyType, input);
    return KeyedWindows.byTask(rows, new Processor(spec, late), outputSchema);
  }

  /** What every task of one aggregation needs (serialisable: shipped to the executors). */
  static final class Spec implements java.io.Serializable {
    final long size;
    final long advance;
    final long grace;
    final boolean emitFinal;
    final Aggregator aggregator;
    final StructType windowKey;
    final StructType slot;
    final KeyedWindows.Columns columns;

    Spec(
        long size,
        long advance,
        long grace,
        boolean emitFinal,
        Aggregator aggregator,
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
      List<Row> batch = arrivalOrder(CollectionConverters.asJava(input), c.sub, c.offset, c.ts);
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
      LinkedHashMap<Window, Object[]> touched = new LinkedHashMap<>(capacity(batch.size()), 0.75f, true);
      Aggregator agg = spec.aggregator;
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
      task.update(RowFactory.create(streamTime, seq(new ArrayList<Object>(open))));
      return CollectionConverters.asScala(out.iterator());
    }

    /** Remove the windows the stream time closed; with emit final, their results. */
    private List<Row> close(TreeSet<Long> open, long streamTime, Aggregator agg) {
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

  /**
   * A declarative aggregation: its accumulator as fields of the window's state row (the last
   * slot of the array it works on holds the window's max timestamp), as the Python aggregators
   * of {@code runtime/spark/stateful/aggregation.py} define them.
   */
  abstract static class Aggregator implements java.io.Serializable {
    abstract List<StructField> fields();

    abstract Object[] initial(long ts);

    abstract void add(Object[] slot, Object value, long ts);

    abstract Object result(Object[] slot);

    /**
     * Fold another aggregate of the same kind into {@code slot} (a session merge, as Kafka
     * Streams' session merger): the result is the fold of both aggregates' records when their
     * records are disjoint in time. The max-timestamp slot is left to the caller.
     */
    abstract void merge(Object[] slot, Object[] other);

    Object[] load(Row stored) {
      Object[] slot = new Object[stored.size()];
      for (int i = 0; i < slot.length; i++) {
        slot[i] = stored.get(i);
      }
      return slot;
    }

    static Aggregator of(String function, DataType value) {
      switch (function) {
        case "count":
          return new Count();
        case "sum":
          return integral(value) ? new SumLong() : new SumDouble();
        case "min":
          return new Extreme(value, -1);
        case "max":
          return new Extreme(value, 1);
        case "avg":
          return new Avg();
        case "latest":
          return new Latest(value);
        case "collect_list":
          return new CollectList(value);
        default:
          throw new IllegalArgumentException("no JVM aggregator for " + function);
      }
    }

    static boolean integral(DataType t) {
      return t.equals(DataTypes.ByteType)
          || t.equals(DataTypes.ShortType)
          || t.equals(DataTypes.IntegerType)
          || t.equals(DataTypes.LongType);
    }
  }

  static final class Count extends Aggregator {
    List<StructField> fields() {
      return List.of(DataTypes.createStructField("n", DataTypes.LongType, false));
    }

    Object[] initial(long ts) {
      return new Object[] {0L, ts};
    }

    void add(Object[] slot, Object value, long ts) {
      slot[0] = (Long) slot[0] + 1;
    }

    void merge(Object[] slot, Object[] other) {
      slot[0] = (Long) slot[0] + (Long) other[0];
    }

    Object result(Object[] slot) {
      return slot[0];
    }
  }

  static final class SumLong extends Aggregator {
    List<StructField> fields() {
      return List.of(DataTypes.createStructField("s", DataTypes.LongType, false));
    }

    Object[] initial(long ts) {
      return new Object[] {0L, ts};
    }

    void add(Object[] slot, Object value, long ts) {
      if (value != null) {
        slot[0] = (Long) slot[0] + ((Number) value).longValue();
      }
    }

    void merge(Object[] slot, Object[] other) {
      slot[0] = (Long) slot[0] + (Long) other[0];
    }

    Object result(Object[] slot) {
      return slot[0];
    }
  }

  static final class SumDouble extends Aggregator {
    List<StructField> fields() {
      return List.of(DataTypes.createStructField("s", DataTypes.DoubleType, false));
    }

    Object[] initial(long ts) {
      return new Object[] {0.0, ts};
    }

    void add(Object[] slot, Object value, long ts) {
      if (value != null) {
        slot[0] = (Double) slot[0] + ((Number) value).doubleValue();
      }
    }

    void merge(Object[] slot, Object[] other) {
      slot[0] = (Double) slot[0] + (Double) other[0];
    }

    Object result(Object[] slot) {
      return slot[0];
    }
  }

  static final class Avg extends Aggregator {
    List<StructField> fields() {
      return List.of(
          DataTypes.createStructField("s", DataTypes.DoubleType, false),
          DataTypes.createStructField("n", DataTypes.LongType, false));
    }

    Object[] initial(long ts) {
      return new Object[] {0.0, 0L, ts};
    }

    void add(Object[] slot, Object value, long ts) {
      if (value != null) {
        slot[0] = (Double) slot[0] + ((Number) value).doubleValue();
        slot[1] = (Long) slot[1] + 1;
      }
    }

    void merge(Object[] slot, Object[] other) {
      slot[0] = (Double) slot[0] + (Double) other[0];
      slot[1] = (Long) slot[1] + (Long) other[1];
    }

    Object result(Object[] slot) {
      long n = (Long) slot[1];
      return n == 0 ? null : (Double) slot[0] / n;
    }
  }

  /** min (sign -1) or max (sign 1) of comparable values; nulls skipped. */
  static final class Extreme extends Aggregator {
    private final DataType type;
    private final int sign;

    Extreme(DataType type, int sign) {
      this.type = type;
      this.sign = sign;
    }

    List<StructField> fields() {
      return List.of(DataTypes.createStructField("v", type, true));
    }

    Object[] initial(long ts) {
      return new Object[] {null, ts};
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    void add(Object[] slot, Object value, long ts) {
      if (value == null) {
        return;
      }
      if (slot[0] == null) {
        slot[0] = value;
        return;
      }
      int c =
          value instanceof byte[]
              ? Arrays.compareUnsigned((byte[]) value, (byte[]) slot[0])
              : ((Comparable) value).compareTo(slot[0]);
      if (c * sign > 0) {
        slot[0] = value;
      }
    }

    void merge(Object[] slot, Object[] other) {
      add(slot, other[0], 0L);
    }

    Object result(Object[] slot) {
      return slot[0];
    }
  }

  /** The value of the newest record; on equal timestamps the later arrival. Nulls skipped. */
  static final class Latest extends Aggregator {
    private final DataType type;

    Latest(DataType type) {
      this.type = type;
    }

    List<StructField> fields() {
      return List.of(
          DataTypes.createStructField("at", DataTypes.LongType, true),
          DataTypes.createStructField("v", type, true));
    }

    Object[] initial(long ts) {
      return new Object[] {null, null, ts};
    }

    void add(Object[] slot, Object value, long ts) {
      if (value != null && (slot[0] == null || ts >= (Long) slot[0])) {
        slot[0] = ts;
        slot[1] = value;
      }
    }

    void merge(Object[] slot, Object[] other) {
      // Merged sessions are disjoint in time: no tie between their newest records.
      if (other[0] != null && (slot[0] == null || (Long) other[0] > (Long) slot[0])) {
        slot[0] = other[0];
        slot[1] = other[1];
      }
    }

    Object result(Object[] slot) {
      return slot[1];
    }
  }

  static final class CollectList extends Aggregator {
    private final DataType type;

    CollectList(DataType type) {
      this.type = type;
    }

    List<StructField> fields() {
      return List.of(DataTypes.createStructField("l", DataTypes.createArrayType(type, true), false));
    }

    Object[] initial(long ts) {
      return new Object[] {seq(new ArrayList<Object>()), ts};
    }

    @SuppressWarnings("unchecked")
    void add(Object[] slot, Object value, long ts) {
      if (value != null) {
        List<Object> list = new ArrayList<>(asList(slot[0]));
        list.add(value);
        slot[0] = seq(list);
      }
    }

    void merge(Object[] slot, Object[] other) {
      // The fold orders a session's values by timestamp; merged lists would need each value's.
      throw new UnsupportedOperationException("collect_list sessions run on the Python engine");
    }

    Object result(Object[] slot) {
      return seq(asList(slot[0]));
    }

    @SuppressWarnings("unchecked")
    private static List<Object> asList(Object stored) {
      if (stored instanceof List) {
        return (List<Object>) stored;
      }
      if (stored instanceof scala.collection.Seq) {
        return new ArrayList<>(CollectionConverters.asJava((scala.collection.Seq<Object>) stored));
      }
      return Collections.emptyList();
    }
  }
}
