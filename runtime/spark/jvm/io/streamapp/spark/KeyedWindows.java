package io.streamapp.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
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
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

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
      this.keys = new HashMap<>(TimeWindowAggregation.capacity(records));
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
          state.updateValue(k.key.row(), RowFactory.create(TimeWindowAggregation.seq(rows)));
        }
        k.dirty = false;
      }
      dirty.clear();
    }
  }

  /**
   * The processor of a window aggregation whose keys are {@link Listing listed} (sessions, sliding
   * windows). Its state variables: {@code task}, the task's value (its stream time, the
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
    private final String layout;
    private final String[] fields;
    transient ValueState<Row> task;
    /** Each key's windows: {@code stateType}, by the key's row. */
    transient MapState<Row, Row> state;
    transient Listing listing;

    /**
     * {@code late} (may be null) counts the records dropped as late; the map state {@code
     * stateName} holds a key ({@code keyRow}) its windows ({@code stateType}); the listing {@code
     * listedBy} ({@link Listing#of}: {@code span}, {@code layout}).
     */
    ListedProcessor(
        LongAccumulator late,
        StructType keyRow,
        String stateName,
        StructType stateType,
        String listedBy,
        long span,
        String layout,
        String... fields) {
      this.late = late;
      this.keyRow = keyRow;
      this.stateName = stateName;
      this.stateType = stateType;
      this.listedBy = listedBy;
      this.span = span;
      this.layout = layout;
      this.fields = fields.clone();
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      listing = Listing.of(getHandle(), listedBy, keyRow, span, layout);
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
      row[row.length - 1] = TimeWindowAggregation.seq(listing.saved());
      task.update(RowFactory.create(row));
    }

    void countLate(long count) {
      if (count > 0 && late != null) {
        late.add(count);
      }
    }
  }

  /**
   * The task's keys listed by the time bucket of their windows (a session's end, a sliding
   * window's start), so that closing and forgetting read only the keys of the buckets concerned:
   * bucket = time / width. A listing left behind by a window that moved to another bucket is
   * harmless: readers check the bounds. Readers visit <em>groups</em> (a {@link Ring}'s slots, a
   * {@link Chunks} listing's buckets). The buckets listed are part of the task's state
   * ({@link #saved}).
   */
  abstract static class Listing {
    final long width;

    Listing(long width) {
      this.width = width;
    }

    /**
     * The layout of a new checkpoint ({@code chunks}: {@link Chunks}) or of one recorded before
     * it ({@code ring}: {@link Ring}; the Python side's {@code checkpoints.WINDOW_LISTING_CONF}).
     * {@code span}: the longest time, in ms, from a window's listed time to its forgetting.
     */
    static Listing of(StatefulProcessorHandle handle, String name, StructType keyRow, long span, String layout) {
      if ("ring".equals(layout)) {
        return new Ring(handle, name, keyRow, span);
      }
      if ("chunks".equals(layout)) {
        return new Chunks(handle, name, keyRow, span);
      }
      throw new IllegalArgumentException("window listing is chunks or ring, not " + layout);
    }

    long bucket(long time) {
      return Math.floorDiv(time, width);
    }

    /** The type of the listing's field in the task's state. */
    abstract DataType savedType();

    /** A batch begins with the listing saved before it (null: none). */
    abstract void begin(List<?> saved);

    /** The listing's field for the task's state, once the batch is {@link #write written}. */
    abstract List<Object> saved();

    /** List key {@code k} under the bucket of {@code time}. */
    abstract void list(Key k, long time);

    /** The groups of the buckets that hold times in [low, high]. */
    abstract Set<Long> overlapping(long low, long high);

    /** The groups of the buckets wholly before {@code horizon}, no longer listed. */
    abstract Set<Long> before(long horizon);

    /** The keys listed in {@code group} (a key may come more than once). */
    abstract List<Key> keys(long group);

    /** Whether a window listed at {@code time} is listed in {@code group}. */
    abstract boolean in(long time, long group);

    /** Take key {@code k} off {@code group} (it has no window there any more). */
    abstract void unlist(long group, Key k);

    /** Write what the batch listed. */
    abstract void write();
  }

  /**
   * A bucket's keys in chunks, one per batch that listed keys under it: a map state from
   * (bucket, chunk) to the keys, written once per bucket at the end of a batch, and a bucket's
   * chunk count in the task's state. A batch puts a few large values instead of one per key, and
   * a forgotten bucket's chunks go whole.
   */
  static final class Chunks extends Listing {
    /** Buckets per span: the buckets a close reads hold fewer keys than the window's life. */
    static final int BUCKETS = 16;
    private static final StructType CHUNK =
        new StructType().add("bucket", DataTypes.LongType, false).add("chunk", DataTypes.IntegerType, false);
    private static final StructType SAVED =
        new StructType().add("bucket", DataTypes.LongType, false).add("chunks", DataTypes.IntegerType, false);
    private final MapState<Row, Row> chunks;
    /** Bucket → chunks written (the buckets listed). */
    private final TreeMap<Long, Integer> buckets = new TreeMap<>();
    /** Chunks of the buckets {@link #before} took off, to read in this batch and remove. */
    private final Map<Long, Integer> leaving = new HashMap<>();
    /** This batch's keys per bucket. */
    private final Map<Long, List<Key>> pending = new HashMap<>();

    Chunks(StatefulProcessorHandle handle, String name, StructType keyRow, long span) {
      super(Math.max(1L, (span + BUCKETS - 1) / BUCKETS));
      StructType keys =
          new StructType().add("keys", DataTypes.createArrayType(keyRow.apply("key").dataType(), true), false);
      this.chunks = handle.getMapState(name, Encoders.row(CHUNK), Encoders.row(keys), TTLConfig.NONE());
    }

    @Override
    DataType savedType() {
      return DataTypes.createArrayType(SAVED, false);
    }

    @Override
    void begin(List<?> saved) {
      buckets.clear();
      leaving.clear();
      pending.clear();
      if (saved != null) {
        for (Object o : saved) {
          Row r = (Row) o;
          buckets.put(r.getLong(0), r.getInt(1));
        }
      }
    }

    @Override
    List<Object> saved() {
      List<Object> out = new ArrayList<>(buckets.size());
      for (Map.Entry<Long, Integer> e : buckets.entrySet()) {
        out.add(RowFactory.create(e.getKey(), e.getValue()));
      }
      return out;
    }

    @Override
    void list(Key k, long time) {
      long bucket = bucket(time);
      List<Key> listed = pending.get(bucket);
      if (listed == null) {
        listed = new ArrayList<>();
        pending.put(bucket, listed);
        if (!leaving.containsKey(bucket)) {
          buckets.putIfAbsent(bucket, 0);
        }
      }
      listed.add(k);
    }

    @Override
    Set<Long> overlapping(long low, long high) {
      Set<Long> out = new TreeSet<>();
      for (long b : buckets.keySet()) {
        long first = b * width;
        if (first + width - 1 >= low && first <= high) {
          out.add(b);
        }
      }
      return out;
    }

    @Override
    Set<Long> before(long horizon) {
      Set<Long> out = new TreeSet<>();
      while (!buckets.isEmpty() && (buckets.firstKey() + 1) * width - 1 < horizon) {
        Map.Entry<Long, Integer> first = buckets.pollFirstEntry();
        leaving.put(first.getKey(), first.getValue());
        out.add(first.getKey());
      }
      return out;
    }

    @Override
    List<Key> keys(long bucket) {
      Integer written = leaving.containsKey(bucket) ? leaving.get(bucket) : buckets.get(bucket);
      List<Key> out = new ArrayList<>();
      for (int i = 0; written != null && i < written; i++) {
        Row chunk = chunks.getValue(RowFactory.create(bucket, i));
        if (chunk != null) {
          for (Object key : chunk.getList(0)) {
            out.add(new Key(key));
          }
        }
      }
      List<Key> listed = pending.get(bucket);
      if (listed != null) {
        out.addAll(listed);
      }
      return out;
    }

    @Override
    boolean in(long time, long bucket) {
      return bucket(time) == bucket;
    }

    @Override
    void unlist(long bucket, Key k) {
      // A bucket's chunks leave whole, with the bucket (write).
    }

    @Override
    void write() {
      for (Map.Entry<Long, List<Key>> e : pending.entrySet()) {
        long bucket = e.getKey();
        if (leaving.containsKey(bucket)) {
          continue; // forgotten in this batch: its keys were read
        }
        List<Object> keys = new ArrayList<>(e.getValue().size());
        for (Key k : e.getValue()) {
          keys.add(k.key);
        }
        int chunk = buckets.get(bucket);
        chunks.updateValue(RowFactory.create(bucket, chunk), RowFactory.create(TimeWindowAggregation.seq(keys)));
        buckets.put(bucket, chunk + 1);
      }
      for (Map.Entry<Long, Integer> e : leaving.entrySet()) {
        for (int i = 0; i < e.getValue(); i++) {
          chunks.removeKey(RowFactory.create(e.getKey(), i));
        }
      }
      pending.clear();
      leaving.clear();
    }
  }

  /**
   * The layout of a checkpoint recorded before {@link Chunks}: a ring of {@value #SLOTS} map
   * states (key → the bucket it was listed under), slot = bucket mod the ring, one entry per key
   * and bucket written as the key is listed. The width spreads the span over {@code SLOTS - 3}
   * buckets, so the buckets alive after a batch fit the ring; a listing of another bucket in the
   * same slot is harmless (readers check the bounds). (Map states, not list states: Spark's
   * RocksDB store reads a key before every merge into it, so appending to a list costs as much as
   * the list is long.)
   */
  static final class Ring extends Listing {
    static final int SLOTS = 8;
    private static final StructType LISTED = new StructType().add("bucket", DataTypes.LongType, false);
    private final List<MapState<Row, Row>> maps = new ArrayList<>(SLOTS);
    private final Set<List<Object>> listed = new HashSet<>();
    private TreeSet<Long> buckets = new TreeSet<>();

    Ring(StatefulProcessorHandle handle, String name, StructType keyRow, long span) {
      super(Math.max(1L, (span + SLOTS - 4) / (SLOTS - 3)));
      for (int i = 0; i < SLOTS; i++) {
        maps.add(handle.getMapState(name + i, Encoders.row(keyRow), Encoders.row(LISTED), TTLConfig.NONE()));
      }
    }

    @Override
    DataType savedType() {
      return DataTypes.createArrayType(DataTypes.LongType, false);
    }

    @Override
    void begin(List<?> saved) {
      listed.clear();
      buckets = new TreeSet<>();
      if (saved != null) {
        for (Object b : saved) {
          buckets.add((Long) b);
        }
      }
    }

    @Override
    List<Object> saved() {
      return new ArrayList<>(buckets);
    }

    long slot(long bucket) {
      return Math.floorMod(bucket, (long) SLOTS);
    }

    @Override
    boolean in(long time, long slot) {
      return slot(bucket(time)) == slot;
    }

    @Override
    void list(Key k, long time) {
      long bucket = bucket(time);
      if (listed.add(List.of(k, bucket))) {
        maps.get((int) slot(bucket)).updateValue(k.row(), RowFactory.create(bucket));
        buckets.add(bucket);
      }
    }

    @Override
    Set<Long> overlapping(long low, long high) {
      Set<Long> slots = new TreeSet<>();
      for (long b : buckets) {
        long first = b * width;
        if (first + width - 1 >= low && first <= high) {
          slots.add(slot(b));
        }
      }
      return slots;
    }

    @Override
    Set<Long> before(long horizon) {
      Set<Long> slots = new TreeSet<>();
      while (!buckets.isEmpty() && (buckets.first() + 1) * width - 1 < horizon) {
        slots.add(slot(buckets.pollFirst()));
      }
      return slots;
    }

    @Override
    List<Key> keys(long slot) {
      List<Key> keys = new ArrayList<>();
      scala.collection.Iterator<Row> it = maps.get((int) slot).keys();
      while (it.hasNext()) {
        keys.add(new Key(it.next().get(0)));
      }
      return keys;
    }

    @Override
    void unlist(long slot, Key k) {
      maps.get((int) slot).removeKey(k.row());
    }

    @Override
    void write() {}
  }

  static Row row(
      String kind, Object key, long start, long end, Object value, long ts, Object partition, Object offset) {
    return RowFactory.create(kind, key, start, end, value, ts, partition, offset);
  }
}
