package io.streamapp.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.StatefulProcessorHandle;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * What the window aggregations with their state per record key (sessions, sliding windows)
 * share: the input's columns, the grouping by task, a key's windows as one map-state value, the
 * batch's cache of them, and the ring of list states that lists the keys by the time bucket of
 * their windows, so that closing and forgetting read only the buckets concerned.
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
  static StructType windows(String field, List<String> bounds, TimeWindowAggregation.Aggregator agg) {
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
     * serialised bytes, unsigned (its stores' and suppression buffer's): a text key's UTF-8, a
     * long or int key's big-endian two's complement, a double's IEEE bits. Other keys (structs)
     * by their text.
     */
    static int compare(Object a, Object b) {
      if (a instanceof byte[] x && b instanceof byte[] y) {
        return Arrays.compareUnsigned(x, y);
      }
      if (a instanceof String x && b instanceof String y) {
        return Arrays.compareUnsigned(
            x.getBytes(StandardCharsets.UTF_8), y.getBytes(StandardCharsets.UTF_8));
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
    private final MapState<Row, Row> state;
    private final Map<Key, V> keys;
    private final Set<Key> dirty;

    /** {@code records}: the batch's records, at most a key each (the maps are sized for them). */
    Keys(MapState<Row, Row> state, int records) {
      this.state = state;
      this.keys = new HashMap<>(TimeWindowAggregation.capacity(records));
      this.dirty = new LinkedHashSet<>(TimeWindowAggregation.capacity(records));
    }

    /** The key's windows from its stored value (null: none). */
    abstract V load(Row stored);

    /** The stored rows of the key's windows (none: the key is removed). */
    abstract List<Object> rows(V windows);

    V of(Key k) {
      V found = keys.get(k);
      if (found == null) {
        found = load(state.getValue(k.row()));
        keys.put(k, found);
      }
      return found;
    }

    void changed(Key k) {
      dirty.add(k);
    }

    void write() {
      for (Key k : dirty) {
        List<Object> rows = rows(keys.get(k));
        if (rows.isEmpty()) {
          state.removeKey(k.row());
        } else {
          state.updateValue(k.row(), RowFactory.create(TimeWindowAggregation.seq(rows)));
        }
      }
      dirty.clear();
    }
  }

  /**
   * The task's keys listed by the time bucket of their windows (a session's end, a sliding
   * window's start) in a ring of {@value #SLOTS} map states (key → the bucket it was listed
   * under): bucket = time / width, slot = bucket mod the ring. The width spreads the time a window
   * stays over {@code SLOTS - 3} buckets, so the buckets alive after a batch fit the ring. A
   * listing left behind by a window that moved to another bucket, or of another bucket in the same
   * slot, is harmless: readers check the bounds. The buckets listed are part of the task's state
   * ({@link #buckets}). (Map states, not list states: Spark's RocksDB store reads a key before
   * every merge into it, so appending to a list costs as much as the list is long.)
   */
  static final class Ring {
    static final int SLOTS = 8;
    private static final StructType LISTED = new StructType().add("bucket", DataTypes.LongType, false);
    private final long width;
    private final List<MapState<Row, Row>> maps = new ArrayList<>(SLOTS);
    private final Set<List<Object>> listed = new HashSet<>();
    private TreeSet<Long> buckets = new TreeSet<>();

    /** {@code span}: the longest time, in ms, from a window's listed time to its forgetting. */
    static long width(long span) {
      return Math.max(1L, (span + SLOTS - 4) / (SLOTS - 3));
    }

    Ring(StatefulProcessorHandle handle, String name, StructType keyRow, long width) {
      this.width = width;
      for (int i = 0; i < SLOTS; i++) {
        maps.add(handle.getMapState(name + i, Encoders.row(keyRow), Encoders.row(LISTED), TTLConfig.NONE()));
      }
    }

    /** A batch begins with the buckets listed before it (from the task's state). */
    void begin(List<Long> saved) {
      listed.clear();
      buckets = new TreeSet<>(saved);
    }

    /** The buckets listed, for the task's state. */
    List<Object> buckets() {
      return new ArrayList<>(buckets);
    }

    long bucket(long time) {
      return Math.floorDiv(time, width);
    }

    int slot(long bucket) {
      return (int) Math.floorMod(bucket, (long) SLOTS);
    }

    /** Whether a window listed at {@code time} is listed in {@code slot}. */
    boolean in(long time, int slot) {
      return slot(bucket(time)) == slot;
    }

    /** List key {@code k} under the bucket of {@code time} (once a batch). */
    void list(Key k, long time) {
      long bucket = bucket(time);
      if (listed.add(List.of(k, bucket))) {
        maps.get(slot(bucket)).updateValue(k.row(), RowFactory.create(bucket));
        buckets.add(bucket);
      }
    }

    /** The slots of the buckets that hold times in [low, high]. */
    Set<Integer> overlapping(long low, long high) {
      Set<Integer> slots = new TreeSet<>();
      for (long b : buckets) {
        long first = b * width;
        if (first + width - 1 >= low && first <= high) {
          slots.add(slot(b));
        }
      }
      return slots;
    }

    /** The slots of the buckets wholly before {@code horizon}, no longer listed. */
    Set<Integer> before(long horizon) {
      Set<Integer> slots = new TreeSet<>();
      while (!buckets.isEmpty() && (buckets.first() + 1) * width - 1 < horizon) {
        slots.add(slot(buckets.pollFirst()));
      }
      return slots;
    }

    /** The keys listed in {@code slot}. */
    List<Key> keys(int slot) {
      List<Key> keys = new ArrayList<>();
      scala.collection.Iterator<Row> it = maps.get(slot).keys();
      while (it.hasNext()) {
        keys.add(new Key(it.next().get(0)));
      }
      return keys;
    }

    /** Take key {@code k} off {@code slot} (it has no window there any more). */
    void unlist(int slot, Key k) {
      maps.get(slot).removeKey(k.row());
    }
  }

  static Row row(
      String kind, Object key, long start, long end, Object value, long ts, Object partition, Object offset) {
    return RowFactory.create(kind, key, start, end, value, ts, partition, offset);
  }
}
