package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
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
 * Kafka Streams' session window aggregation with a declarative aggregator (count, sum, min, max,
 * avg, latest), with its state per key.
 *
 * <p>The records of a task are one group of a {@code transformWithState}, as in {@link
 * TimeWindowAggregation}. A map state holds each record key's sessions (start, end, aggregate) in
 * RocksDB, so a micro-batch reads and writes only the keys its records have. The semantics are
 * {@code runtime/spark/stateful/windows.py}'s: a record merges every session of its key within the
 * inactivity gap (one still kept: {@code end >= stream time - grace - 2 * gap}, Kafka Streams'
 * store retention), the merged sessions' aggregates are merged (Kafka Streams' session merger)
 * and the record added; a merged session whose end is before {@code stream time - grace - gap}
 * drops the record ({@code late}). Emit updates: per batch and changed session its last value,
 * and a tombstone for every session merged into one of other bounds, in the order of last change.
 * Emit final: one row per session when the stream time passes {@code end + grace + gap}, in the
 * order Kafka Streams closes them (end, start, key) — also a session that closed before a later
 * record merged it, as closing per record would have emitted it.
 *
 * <p>Closing and forgetting sessions without reading the whole task: the task's keys are listed by
 * the time bucket of their sessions' ends, in a ring of {@value #RING} list states (bucket = end /
 * width, slot = bucket mod ring; the width makes the ring cover the time a session is kept, so a
 * slot mostly holds one bucket). A batch reads only the buckets whose sessions it may close or
 * forget; a listing left behind by a session that grew into another bucket is skipped by the
 * bounds check, and dropped when its bucket is forgotten.
 */
public final class SessionWindowAggregation {
  private SessionWindowAggregation() {}

  /** List states in the ring of session ends. */
  static final int RING = 8;

  /**
   * The aggregation of {@code rows} (columns key, value, ts, partition, offset, sub, task_key)
   * grouped by {@code task_key}; rows out as {@link TimeWindowAggregation#apply}'s, with a
   * session's start and end (its first and last record's timestamps) as the window.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      long gap,
      long grace,
      String emit,
      String function,
      String valueType,
      String outputSchema,
      LongAccumulator late) {
    if ("collect_list".equals(function)) {
      throw new IllegalArgumentException(
          "collect_list sessions run on the Python engine: a merge must order the values by timestamp");
    }
    StructType input = rows.schema();
    StructType output = StructType.fromDDL(outputSchema);
    DataType keyType = input.apply("key").dataType();
    TimeWindowAggregation.Aggregator aggregator =
        TimeWindowAggregation.Aggregator.of(function, DataType.fromJson(valueType));
    Spec spec = new Spec(gap, grace, "final".equals(emit), aggregator, keyType, input);
    return rows.groupBy(functions.coalesce(functions.col("task_key"), functions.lit(0)).as("value"))
        .as(Encoders.INT(), Encoders.row(input))
        .transformWithState(
            new Processor(spec, late), TimeMode.None(), OutputMode.Append(), Encoders.row(output));
  }

  static final class Spec implements java.io.Serializable {
    final long gap;
    final long grace;
    final boolean emitFinal;
    final TimeWindowAggregation.Aggregator aggregator;
    final StructType keyRow;
    final StructType sessions;
    /** Milliseconds of session end per bucket of the ring. */
    final long width;
    final int key;
    final int value;
    final int ts;
    final int partition;
    final int offset;
    final int sub;

    Spec(
        long gap,
        long grace,
        boolean emitFinal,
        TimeWindowAggregation.Aggregator aggregator,
        DataType keyType,
        StructType input) {
      this.gap = gap;
      this.grace = grace;
      this.emitFinal = emitFinal;
      this.aggregator = aggregator;
      this.keyRow = new StructType().add("key", keyType, true);
      StructType session =
          new StructType()
              .add("start", DataTypes.LongType, false)
              .add("end", DataTypes.LongType, false);
      for (StructField f : aggregator.fields()) {
        session = session.add(f);
      }
      session = session.add("max_ts", DataTypes.LongType, false);
      this.sessions =
          new StructType().add("sessions", DataTypes.createArrayType(session, false), false);
      // Sessions are kept while their end is within grace + 2 gap of the stream time: that span
      // in RING - 3 buckets, so the buckets alive after a batch fit the ring with room to spare.
      long kept = grace + 2 * gap + 1;
      this.width = Math.max(1L, (kept + RING - 4) / (RING - 3));
      this.key = input.fieldIndex("key");
      this.value = input.fieldIndex("value");
      this.ts = input.fieldIndex("ts");
      this.partition = input.fieldIndex("partition");
      this.offset = input.fieldIndex("offset");
      this.sub = input.fieldIndex("sub");
    }

    long bucket(long end) {
      return Math.floorDiv(end, width);
    }

    int slot(long bucket) {
      return (int) Math.floorMod(bucket, (long) RING);
    }

    /** The stream time at which a session ending at {@code end} closes (emit final). */
    long threshold(long end) {
      return end + grace + gap + 1;
    }

    /** The earliest end of a session still kept at stream time {@code now} (it may merge). */
    long horizon(long now) {
      return now - grace - 2 * gap;
    }
  }

  /** A record key, compared by content (byte[] keys too), with its map-state row made once. */
  static final class Key {
    final Object key;
    private final int hash;
    private Row row;

    Key(Object key) {
      this.key = key;
      this.hash = key instanceof byte[] ? Arrays.hashCode((byte[]) key) : Objects.hashCode(key);
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
      Object k = ((Key) other).key;
      return key instanceof byte[] && k instanceof byte[]
          ? Arrays.equals((byte[]) key, (byte[]) k)
          : Objects.equals(key, k);
    }
  }

  /** A session of a key: bounds and aggregate (its last slot: the max timestamp, the end). */
  static final class Session {
    final long start;
    final long end;
    final Object[] slot;

    Session(long start, long end, Object[] slot) {
      this.start = start;
      this.end = end;
      this.slot = slot;
    }
  }

  /** A session's identity in a batch's changelog. */
  record Span(Key key, long start, long end) {}

  /** A key listed under a bucket in this batch. */
  record Listed(Key key, long bucket) {}

  static final class Processor extends StatefulProcessor<Integer, Row, Row> {
    private final Spec spec;
    private final LongAccumulator late;
    private transient ValueState<Row> task;
    private transient MapState<Row, Row> sessions;
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
              .add("buckets", DataTypes.createArrayType(DataTypes.LongType, false), false);
      task = getHandle().getValueState("task", Encoders.row(taskSchema), TTLConfig.NONE());
      sessions =
          getHandle()
              .getMapState(
                  "sessions", Encoders.row(spec.keyRow), Encoders.row(spec.sessions), TTLConfig.NONE());
      ring = new ArrayList<>(RING);
      for (int i = 0; i < RING; i++) {
        ring.add(getHandle().getListState("ends" + i, Encoders.row(spec.keyRow), TTLConfig.NONE()));
      }
    }

    /** One batch's view of the task's sessions: keys read once, written once. */
    private final class Batch {
      final Map<Key, List<Session>> keys = new HashMap<>();
      final Set<Key> dirty = new LinkedHashSet<>();

      List<Session> of(Key k) {
        List<Session> found = keys.get(k);
        if (found == null) {
          found = load(k);
          keys.put(k, found);
        }
        return found;
      }

      private List<Session> load(Key k) {
        Row stored = sessions.getValue(k.row());
        List<Session> out = new ArrayList<>();
        if (stored == null) {
          return out;
        }
        for (Row s : stored.<Row>getList(0)) {
          Object[] slot = new Object[s.size() - 2];
          for (int i = 0; i < slot.length; i++) {
            slot[i] = s.get(i + 2);
          }
          out.add(new Session(s.getLong(0), s.getLong(1), slot));
        }
        return out;
      }

      void write() {
        for (Key k : dirty) {
          List<Session> list = keys.get(k);
          if (list.isEmpty()) {
            sessions.removeKey(k.row());
            continue;
          }
          List<Object> rows = new ArrayList<>(list.size());
          for (Session s : list) {
            Object[] fields = new Object[s.slot.length + 2];
            fields[0] = s.start;
            fields[1] = s.end;
            System.arraycopy(s.slot, 0, fields, 2, s.slot.length);
            rows.add(RowFactory.create(fields));
          }
          sessions.updateValue(k.row(), RowFactory.create(TimeWindowAggregation.seq(rows)));
        }
        dirty.clear();
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
      // Sessions closing at a stream time up to this one were emitted by an earlier batch.
      long before = streamTime == null ? Long.MIN_VALUE : streamTime;
      TreeSet<Long> buckets = new TreeSet<>();
      if (saved != null) {
        buckets.addAll(saved.getList(1));
      }
      TimeWindowAggregation.Aggregator agg = spec.aggregator;
      Batch batch = new Batch();
      Set<Listed> listed = new HashSet<>();
      // Changed sessions in the order of their last change (null: the tombstone of a merged one).
      LinkedHashMap<Span, Object[]> changed = new LinkedHashMap<>(1024, 0.75f, true);
      List<Row> out = new ArrayList<>();
      List<Row> finals = new ArrayList<>();
      long lateCount = 0;
      for (Row r : records) {
        long ts = r.getLong(spec.ts);
        long previous = streamTime == null ? Long.MIN_VALUE : streamTime;
        streamTime = streamTime == null ? ts : Math.max(streamTime, ts);
        Key k = new Key(r.get(spec.key));
        List<Session> list = batch.of(k);
        long start = ts;
        long end = ts;
        long horizon = spec.horizon(streamTime);
        List<Session> merging = new ArrayList<>(2);
        for (Session s : list) {
          if (s.end >= ts - spec.gap && s.start <= ts + spec.gap && s.end >= horizon) {
            merging.add(s);
            start = Math.min(start, s.start);
            end = Math.max(end, s.end);
          }
        }
        if (end < streamTime - spec.grace - spec.gap) {
          out.add(row("late", k.key, start, end, null, ts, r.get(spec.partition), r.get(spec.offset)));
          lateCount++;
          continue;
        }
        Object[] slot = agg.initial(ts);
        boolean inBucket = false;
        for (Session s : merging) {
          list.remove(s);
          agg.merge(slot, s.slot);
          inBucket |= spec.bucket(s.end) == spec.bucket(end);
          if (s.start == start && s.end == end) {
            continue;
          }
          if (!spec.emitFinal) {
            changed.put(new Span(k, s.start, s.end), null);
          } else {
            long closes = spec.threshold(s.end);
            if (closes > before && closes <= previous) {
              // Closed by an earlier record of this batch: emitted then, merged now.
              finals.add(result(k, s, agg));
            }
          }
        }
        agg.add(slot, r.get(spec.value), ts);
        slot[slot.length - 1] = end;
        Session merged = new Session(start, end, slot);
        int at = 0;
        while (at < list.size() && list.get(at).start < start) {
          at++;
        }
        list.add(at, merged);
        batch.dirty.add(k);
        if (!spec.emitFinal) {
          changed.put(new Span(k, start, end), slot);
        }
        long bucket = spec.bucket(end);
        if (!inBucket && listed.add(new Listed(k, bucket))) {
          ring.get(spec.slot(bucket)).appendValue(k.row());
          buckets.add(bucket);
        }
      }
      if (lateCount > 0 && late != null) {
        late.add(lateCount);
      }
      for (Map.Entry<Span, Object[]> e : changed.entrySet()) {
        Span s = e.getKey();
        Object[] slot = e.getValue();
        out.add(row("update", s.key().key, s.start(), s.end(), slot == null ? null : agg.result(slot), s.end(), null, null));
      }
      if (streamTime != null) {
        if (spec.emitFinal) {
          finals.addAll(close(batch, buckets, before, streamTime, agg));
          // Kafka Streams' order of closing: by end, then start, then key.
          finals.sort(
              Comparator.<Row>comparingLong(f -> f.getLong(3))
                  .thenComparingLong(f -> f.getLong(2))
                  .thenComparing(f -> String.valueOf(f.get(1))));
          out.addAll(finals);
        }
        forget(batch, buckets, streamTime);
      }
      batch.write();
      task.update(
          RowFactory.create(streamTime, TimeWindowAggregation.seq(new ArrayList<Object>(buckets))));
      return CollectionConverters.asScala(out.iterator());
    }

    private Row result(Key k, Session s, TimeWindowAggregation.Aggregator agg) {
      return row("final", k.key, s.start, s.end, agg.result(s.slot), s.end, null, null);
    }

    /** The keys listed in ring slot {@code slot}, each once. */
    private Set<Key> listedIn(int slot) {
      Set<Key> keys = new LinkedHashSet<>();
      scala.collection.Iterator<Row> it = ring.get(slot).get();
      while (it.hasNext()) {
        keys.add(new Key(it.next().get(0)));
      }
      return keys;
    }

    /** Sessions the stream time closed since {@code before} (it passed end + grace + gap). */
    private List<Row> close(
        Batch batch, TreeSet<Long> buckets, long before, long now, TimeWindowAggregation.Aggregator agg) {
      // Ends e with before < threshold(e) <= now.
      long low = before == Long.MIN_VALUE ? Long.MIN_VALUE : before - spec.grace - spec.gap;
      long high = now - spec.grace - spec.gap - 1;
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
      Set<Key> seen = new HashSet<>();
      for (int slot : slots) {
        for (Key k : listedIn(slot)) {
          if (!seen.add(k)) {
            continue;
          }
          for (Session s : batch.of(k)) {
            if (s.end >= low && s.end <= high) {
              out.add(result(k, s, agg));
            }
          }
        }
      }
      return out;
    }

    /**
     * Forget the sessions no record can merge any more (end before the horizon): the buckets
     * wholly before it are read, their keys' old sessions dropped and the slots cleared (a key
     * with a later session in the same slot is listed again).
     */
    private void forget(Batch batch, TreeSet<Long> buckets, long now) {
      long horizon = spec.horizon(now);
      Set<Integer> slots = new TreeSet<>();
      while (!buckets.isEmpty() && (buckets.first() + 1) * spec.width - 1 < horizon) {
        slots.add(spec.slot(buckets.pollFirst()));
      }
      for (int slot : slots) {
        List<Row> keep = new ArrayList<>();
        for (Key k : listedIn(slot)) {
          List<Session> list = batch.of(k);
          boolean again = false;
          for (java.util.Iterator<Session> it = list.iterator(); it.hasNext(); ) {
            Session s = it.next();
            if (s.end < horizon) {
              it.remove();
              batch.dirty.add(k);
            } else if (spec.slot(spec.bucket(s.end)) == slot) {
              again = true;
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
