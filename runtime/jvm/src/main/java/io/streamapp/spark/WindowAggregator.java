package io.streamapp.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;

import scala.jdk.javaapi.CollectionConverters;

/**
 * A declarative aggregation: its accumulator as fields of the window's state row (the last
 * slot of the array it works on holds the window's max timestamp), as the Python aggregators
 * of {@code runtime/spark/stateful/aggregation.py} define them.
 *
 * <p>One kind per function ({@link #of}: count, sum, min, max, avg, latest, collect_list), shared
 * by the three window engines ({@link TimeWindowAggregation}, {@link SlidingWindowAggregation},
 * {@link SessionWindowAggregation}); serialisable, as it is shipped to the executors in their
 * specs.
 */
abstract class WindowAggregator implements java.io.Serializable {
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

  static WindowAggregator of(String function, DataType value) {
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

  static final class Count extends WindowAggregator {
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

  static final class SumLong extends WindowAggregator {
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

  static final class SumDouble extends WindowAggregator {
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

  static final class Avg extends WindowAggregator {
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
  static final class Extreme extends WindowAggregator {
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
  static final class Latest extends WindowAggregator {
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

  static final class CollectList extends WindowAggregator {
    private final DataType type;

    CollectList(DataType type) {
      this.type = type;
    }

    List<StructField> fields() {
      return List.of(DataTypes.createStructField("l", DataTypes.createArrayType(type, true), false));
    }

    Object[] initial(long ts) {
      return new Object[] {Batches.seq(new ArrayList<Object>()), ts};
    }

    @SuppressWarnings("unchecked")
    void add(Object[] slot, Object value, long ts) {
      if (value != null) {
        List<Object> list = new ArrayList<>(asList(slot[0]));
        list.add(value);
        slot[0] = Batches.seq(list);
      }
    }

    void merge(Object[] slot, Object[] other) {
      // The fold orders a session's values by timestamp; merged lists would need each value's.
      throw new UnsupportedOperationException("collect_list sessions run on the Python engine");
    }

    Object result(Object[] slot) {
      return Batches.seq(asList(slot[0]));
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
