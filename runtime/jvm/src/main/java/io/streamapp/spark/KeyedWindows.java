package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

/**
 * What the window aggregations with their state per record key (sessions, sliding windows)
 * share: the input's columns, the grouping by task, a key's windows as one map-state value, the
 * batch's cache of them, and the processor that keeps the listing of the keys by the time bucket
 * of their windows ({@link KeyListing}), so that closing and forgetting read only the buckets
 * concerned.
 */
final class KeyedWindows {
  private KeyedWindows() {}

  /**
   * {@code rows} (columns key, value, ts, partition, offset, sub, task_key) grouped by
   * {@code task_key} (the task's grouping key, made by the Python side's
   * {@code engine.with_task_key}) through {@code processor}; rows out ({@code outputSchema}, DDL):
   * kind, key, window_start, window_end, value, ts, partition, offset.
   */
  static Dataset<Row> byTask(
      Dataset<Row> rows, StatefulProcessor<Integer, Row, Row> processor, String outputSchema) {
    // Grouped by the column itself, named and typed as groupByKey's key was (the state's key
    // schema: value int not null), not through a function of each deserialised row.
    return rows.groupBy(functions.coalesce(functions.col("task_key"), functions.lit(0)).as("value"))
        .as(Encoders.INT(), Encoders.row(rows.schema()))
        .transformWithState(
            processor, TimeMode.None(), OutputMode.Append(), Encoders.row(StructType.fromDDL(outputSchema)));
  }

  /** The input row's columns by index (made on the driver, shipped with the processor). */
  static final class Columns implements java.io.Serializable {
    final int key;
    final int value;
    final int ts;
    final int partition;
    final int offset;
    final int sub;
    final StructType keyRow;

    Columns(StructType input) {
      this.key = input.fieldIndex("key");
      this.value = input.fieldIndex("value");
      this.ts = input.fieldIndex("ts");
      this.partition = input.fieldIndex("partition");
      this.offset = input.fieldIndex("offset");
      this.sub = input.fieldIndex("sub");
      DataType keyType = input.apply("key").dataType();
      this.keyRow = new StructType().add("key", keyType, true);
    }
  }

  /**
   * A key's windows as one map-state value: {@code field}, an array of structs of the
   * {@code bounds} (bigint), the aggregator's fields and the max timestamp.
   */
  static StructType windows(String field, List<String> bounds, WindowAggregator agg) {
    StructType window = new StructType();
    for (String bound : bounds) {
      window = window.add(bound, DataTypes.LongType, false);
    }
    for (StructField f : agg.fields()) {
      window = window.add(f);
    }
    window = window.add("max_ts", DataTypes.LongType, false);
    return new StructType().add(field, DataTypes.createArrayType(window, false), false);
  }

  /** The aggregate slot of a stored window row whose first {@code bounds} fields are its bounds. */
  static Object[] slot(Row window, int bounds) {
    Object[] slot = new Object[window.size() - bounds];
    for (int i = 0; i < slot.length; i++) {
      slot[i] = window.get(i + bounds);
    }
    return slot;
  }

  /** A stored window row: its bounds, then its aggregate slot. */
  static Row window(Object[] slot, long... bounds) {
    Object[] fields = new Object[slot.length + bounds.length];
    for (int i = 0; i < bounds.length; i++) {
      fields[i] = bounds[i];
    }
    System.arraycopy(slot, 0, fields, bounds.length, slot.length);
    return RowFactory.create(fields);
  }

  /**
   * Kafka Streams' order of final result rows ({@link #row}) that close together: by end, then
   * start, then key (emit final's time-ordered store); {@code keyBeforeStart}: by end, then key,
   * then start (suppression's buffer, for sessions; a time window's start follows from its end).
   */
  static Comparator<Row> finalOrder(boolean keyBeforeStart) {
    Comparator<Row> byStart = Comparator.comparingLong(f -> f.getLong(2));
    Comparator<Row> byKey = (f, g) -> Key.compare(f.get(1), g.get(1));
    return Comparator.<Row>comparingLong(f -> f.getLong(3))
        .thenComparing(keyBeforeStart ? byKey : byStart)
        .thenComparing(keyBeforeStart ? byStart : byKey);
  }

  /** Whether {@code emit} (updates, final or suppress) emits one final result per window. */
  static boolean emitsFinal(String emit) {
    return "final".equals(emit) || "suppress".equals(emit);
  }

  /** A record key, compared by content (byte[] keys too), with its map-state row made once. */
  static final class Key {
    final Object key;
    private final int hash;
    private Row row;

    Key(Object key) {
      this.key = key;
      this.hash = hash(key);
    }

    /** A record key's hash by content (a byte[] key too). */
    static int hash(Object key) {
      return key instanceof byte[] ? Arrays.hashCode((byte[]) key) : Objects.hashCode(key);
    }

    /**
     * Kafka Streams' order of record keys where windows close together: the order of their
     * serialised bytes, unsigned (its stores' and suppression buffer's): a text key's UTF-8 (a
     * byte[] here: the windows hold a text key as its bytes), a long or int key's big-endian two's
     * complement, a double's IEEE bits. Other keys (structs) by their text.
     */
    static int compare(Object a, Object b) {
      if (a instanceof byte[] x && b instanceof byte[] y) {
        return Arrays.compareUnsigned(x, y);
      }
      if (a instanceof Long x && b instanceof Long y) {
        return Long.compareUnsigned(x, y);
      }
      if (a instanceof Integer x && b instanceof Integer y) {
        return Integer.compareUnsigned(x, y);
      }
      if (a instanceof Double x && b instanceof Double y) {
        return Long.compareUnsigned(Double.doubleToLongBits(x), Double.doubleToLongBits(y));
      }
      return String.valueOf(a).compareTo(String.valueOf(b));
    }

    /** Whether two record keys are equal by content (byte[] keys too). */
    static boolean same(Object a, Object b) {
      return a instanceof byte[] && b instanceof byte[]
          ? Arrays.equals((byte[]) a, (byte[]) b)
          : Objects.equals(a, b);
    }

    Row row() {
      if (row == null) {
        row = RowFactory.create(key);
      }
      return row;
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object other) {
      if (!(other instanceof Key)) {
        return false;
      }
      return same(key, ((Key) other).key);
    }
  }

  /** A window's identity in a batch's changelog. */
  record Span(Key key, long start, long end) {}

  /**
   * One batch's view of the task's keys: each key's windows ({@code V}) read once from the map
   * state, and those changed written once at the end.
   */
  abstract static class Keys<V> {
    /** A key's windows in the batch, and whether they changed. */
    private static final class Loaded<V> {
      final Key key;
      final V windows;
      boolean dirty;

      Loaded(Key key, V windows) {
        this.key = key;
        this.windows = windows;
      }
    }

    private final MapState<Row, Row> state;
    private final Map<Key, Loaded<V>> keys;
    private final List<Loaded<V>> dirty;
    /** The key last looked up: {@link #changed} mostly follows {@link #of} for the same key. */
    private Loaded<V> last;

    /** {@code records}: the batch's records, at most a key each (the maps are sized for them). */
    Keys(MapState<Row, Row> state, int records) {
      this.state = state;
      this.keys = new HashMap<>(Batches.capacity(records));
      this.dirty = new ArrayList<>();
    }

    /** The key's windows from its stored value (null: none). */
    abstract V load(Row stored);

    /** The stored rows of the key's windows (none: the key is removed). */
    abstract List<Object> rows(V windows);

    private Loaded<V> loaded(Key k) {
      if (last != null && last.key == k) {
        return last;
      }
      Loaded<V> found = keys.get(k);
      if (found == null) {
        found = new Loaded<>(k, load(state.getValue(k.row())));
        keys.put(k, found);
      }
      last = found;
      return found;
    }

    V of(Key k) {
      return loaded(k).windows;
    }

    void changed(Key k) {
      Loaded<V> found = loaded(k);
      if (!found.dirty) {
        found.dirty = true;
        dirty.add(found);
      }
    }

    void write() {
      for (Loaded<V> k : dirty) {
        List<Object> rows = rows(k.windows);
        if (rows.isEmpty()) {
          state.removeKey(k.key.row());
        } else {
          state.updateValue(k.key.row(), RowFactory.create(Batches.seq(rows)));
        }
        k.dirty = false;
      }
      dirty.clear();
    }
  }

  /**
   * The processor of a window aggregation whose keys are {@link KeyListing listed} (sessions,
   * sliding windows). Its state variables: {@code task}, the task's value (its stream time, the
   * aggregation's own {@code fields}, longs, and the listing's buckets); a map state of each key's
   * windows; the listing. A batch reads the task's value with {@link #begin} and saves it with
   * {@link #end}.
   */
  abstract static class ListedProcessor extends StatefulProcessor<Integer, Row, Row> {
    private final LongAccumulator late;
    private final StructType keyRow;
    private final String stateName;
    private final StructType stateType;
    private final String listedBy;
    private final long span;
    private final String[] fields;
    transient ValueState<Row> task;
    /** Each key's windows: {@code stateType}, by the key's row. */
    transient MapState<Row, Row> state;
    transient KeyListing listing;

    /**
     * {@code late} (may be null) counts the records dropped as late; the map state {@code
     * stateName} holds a key ({@code keyRow}) its windows ({@code stateType}); the listing {@code
     * listedBy} ({@link KeyListing}, of windows forgotten at most {@code span} ms after their
     * listed time).
     */
    ListedProcessor(
        LongAccumulator late,
        StructType keyRow,
        String stateName,
        StructType stateType,
        String listedBy,
        long span,
        String... fields) {
      this.late = late;
      this.keyRow = keyRow;
      this.stateName = stateName;
      this.stateType = stateType;
      this.listedBy = listedBy;
      this.span = span;
      this.fields = fields.clone();
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      listing = new KeyListing(getHandle(), listedBy, keyRow, span);
      StructType taskSchema = new StructType().add("stream_time", DataTypes.LongType, true);
      for (String field : fields) {
        taskSchema = taskSchema.add(field, DataTypes.LongType, true);
      }
      taskSchema = taskSchema.add("buckets", listing.savedType(), false);
      task = getHandle().getValueState("task", Encoders.row(taskSchema), TTLConfig.NONE());
      state = getHandle().getMapState(stateName, Encoders.row(keyRow), Encoders.row(stateType), TTLConfig.NONE());
    }

    /** The task's value at a batch's start (null: none yet), the listing begun from it. */
    Row begin() {
      Row saved = task.exists() ? task.get() : null;
      listing.begin(saved == null ? List.of() : saved.getList(fields.length + 1));
      return saved;
    }

    /** Field {@code i} of the task's value ({@code 0}: the stream time; null: none yet). */
    static Long field(Row saved, int i) {
      return saved == null || saved.isNullAt(i) ? null : saved.getLong(i);
    }

    /** The batch's end: the listing written and the task's value saved. */
    void end(Long streamTime, Long... values) {
      listing.write();
      Object[] row = new Object[values.length + 2];
      row[0] = streamTime;
      System.arraycopy(values, 0, row, 1, values.length);
      row[row.length - 1] = Batches.seq(listing.saved());
      task.update(RowFactory.create(row));
    }

    void countLate(long count) {
      if (count > 0 && late != null) {
        late.add(count);
      }
    }
  }

  static Row row(
      String kind, Object key, long start, long end, Object value, long ts, Object partition, Object offset) {
    return RowFactory.create(kind, key, start, end, value, ts, partition, offset);
  }
}
