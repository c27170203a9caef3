package io.streamapp.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import io.streamapp.spark.KeyedWindows.Key;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.StatefulProcessorHandle;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The task's keys listed by the time bucket of their windows (a session's end, a sliding
 * window's start), so that closing and forgetting read only the keys of the buckets concerned:
 * bucket = time / width, {@value #BUCKETS} buckets per span. A bucket's keys are kept in chunks,
 * one per batch that listed keys under it: a map state from (bucket, chunk) to the keys, written
 * once per bucket at the end of a batch, and a bucket's chunk count in the task's state
 * ({@link #saved}). A batch puts a few large values instead of one per key, and a forgotten
 * bucket's chunks go whole. A listing left behind by a window that moved to another bucket is
 * harmless: readers check the bounds.
 */
final class KeyListing {
  /** Buckets per span: the buckets a close reads hold fewer keys than the window's life. */
  static final int BUCKETS = 16;
  private static final StructType CHUNK =
      new StructType().add("bucket", DataTypes.LongType, false).add("chunk", DataTypes.IntegerType, false);
  private static final StructType SAVED =
      new StructType().add("bucket", DataTypes.LongType, false).add("chunks", DataTypes.IntegerType, false);
  final long width;
  private final MapState<Row, Row> chunks;
  /** Bucket → chunks written (the buckets listed). */
  private final TreeMap<Long, Integer> buckets = new TreeMap<>();
  /** Chunks of the buckets {@link #before} took off, to read in this batch and remove. */
  private final Map<Long, Integer> leaving = new HashMap<>();
  /** This batch's keys per bucket. */
  private final Map<Long, List<Key>> pending = new HashMap<>();

  /**
   * The listing {@code name} of keys ({@code keyRow}); {@code span}: the longest time, in ms,
   * from a window's listed time to its forgetting.
   */
  KeyListing(StatefulProcessorHandle handle, String name, StructType keyRow, long span) {
    this.width = Math.max(1L, (span + BUCKETS - 1) / BUCKETS);
    StructType keys =
        new StructType().add("keys", DataTypes.createArrayType(keyRow.apply("key").dataType(), true), false);
    this.chunks = handle.getMapState(name, Encoders.row(CHUNK), Encoders.row(keys), TTLConfig.NONE());
  }

  long bucket(long time) {
    return Math.floorDiv(time, width);
  }

  /** The type of the listing's field in the task's state. */
  DataType savedType() {
    return DataTypes.createArrayType(SAVED, false);
  }

  /** A batch begins with the listing saved before it (null: none). */
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

  /** The listing's field for the task's state, once the batch is {@link #write written}. */
  List<Object> saved() {
    List<Object> out = new ArrayList<>(buckets.size());
    for (Map.Entry<Long, Integer> e : buckets.entrySet()) {
      out.add(RowFactory.create(e.getKey(), e.getValue()));
    }
    return out;
  }

  /** List key {@code k} under the bucket of {@code time}. */
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

  /** The buckets that hold times in [low, high]. */
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

  /**
   * The buckets wholly before {@code horizon}, no longer listed: their keys are read in this
   * batch ({@link #keys}), and their chunks removed whole ({@link #write}).
   */
  Set<Long> before(long horizon) {
    Set<Long> out = new TreeSet<>();
    while (!buckets.isEmpty() && (buckets.firstKey() + 1) * width - 1 < horizon) {
      Map.Entry<Long, Integer> first = buckets.pollFirstEntry();
      leaving.put(first.getKey(), first.getValue());
      out.add(first.getKey());
    }
    return out;
  }

  /** The keys listed in {@code bucket} (a key may come more than once). */
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

  /** Write what the batch listed, and remove the chunks of the buckets it forgot. */
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
      chunks.updateValue(RowFactory.create(bucket, chunk), RowFactory.create(Batches.seq(keys)));
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
