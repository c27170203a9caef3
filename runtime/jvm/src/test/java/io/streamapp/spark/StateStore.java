package io.streamapp.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.encoders.AgnosticEncoder;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder$;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.QueryInfo;
import org.apache.spark.sql.streaming.StatefulProcessorHandle;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.ValueState;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One group's state of a {@code transformWithState}, in memory, for the window engines' tests: a
 * {@link StatefulProcessorHandle} whose value and map states keep what the processor writes
 * encoded with the encoders the processor declares (Spark's own serialiser and deserialiser), as
 * the RocksDB state store does: a value that does not fit its declared schema fails here too, and
 * what a processor reads back is a decoded copy, never the object it wrote. The states outlive a
 * processor: a second processor on the same store is a restart from the checkpoint.
 */
final class StateStore implements StatefulProcessorHandle {
  private static final long serialVersionUID = 1L;

  /** A state's encoded values, by the state's name (map states: encoded key → encoded value). */
  private final Map<String, Map<InternalRow, InternalRow>> states = new HashMap<>();

  /** Encodes and decodes values of one type as Spark's state store does. */
  static final class Codec<T> {
    private final ExpressionEncoder.Serializer<T> serializer;
    private final ExpressionEncoder.Deserializer<T> deserializer;

    Codec(Encoder<T> encoder) {
      ExpressionEncoder<T> expression =
          encoder instanceof ExpressionEncoder<T> e
              ? e
              : ExpressionEncoder$.MODULE$.apply((AgnosticEncoder<T>) encoder);
      this.serializer = expression.createSerializer();
      ExpressionEncoder<T> bound =
          expression.resolveAndBind(expression.resolveAndBind$default$1(), expression.resolveAndBind$default$2());
      this.deserializer = bound.createDeserializer();
    }

    InternalRow encode(T value) {
      return serializer.apply(value).copy(); // the serialiser reuses its row
    }

    T decode(InternalRow row) {
      return deserializer.apply(row);
    }
  }

  /** The encoded entries of state {@code name} (none yet: empty). */
  int size(String name) {
    Map<InternalRow, InternalRow> state = states.get(name);
    return state == null ? 0 : state.size();
  }

  @Override
  public <T> ValueState<T> getValueState(String name, Encoder<T> encoder, TTLConfig ttl) {
    Map<InternalRow, InternalRow> state = states.computeIfAbsent(name, n -> new LinkedHashMap<>());
    Codec<T> codec = new Codec<>(encoder);
    InternalRow only = new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(0);
    return new ValueState<T>() {
      private static final long serialVersionUID = 1L;

      @Override
      public boolean exists() {
        return state.containsKey(only);
      }

      @Override
      public T get() {
        InternalRow stored = state.get(only);
        return stored == null ? null : codec.decode(stored);
      }

      @Override
      public void update(T value) {
        state.put(only, codec.encode(value));
      }

      @Override
      public void clear() {
        state.clear();
      }
    };
  }

  @Override
  public <T> ValueState<T> getValueState(String name, TTLConfig ttl, Encoder<T> encoder) {
    return getValueState(name, encoder, ttl);
  }

  @Override
  public <K, V> MapState<K, V> getMapState(
      String name, Encoder<K> keyEncoder, Encoder<V> valueEncoder, TTLConfig ttl) {
    Map<InternalRow, InternalRow> state = states.computeIfAbsent(name, n -> new LinkedHashMap<>());
    Codec<K> keys = new Codec<>(keyEncoder);
    Codec<V> values = new Codec<>(valueEncoder);
    return new MapState<K, V>() {
      private static final long serialVersionUID = 1L;

      @Override
      public boolean exists() {
        return !state.isEmpty();
      }

      @Override
      public V getValue(K key) {
        InternalRow stored = state.get(keys.encode(key));
        return stored == null ? null : values.decode(stored);
      }

      @Override
      public boolean containsKey(K key) {
        return state.containsKey(keys.encode(key));
      }

      @Override
      public void updateValue(K key, V value) {
        state.put(keys.encode(key), values.encode(value));
      }

      @Override
      public scala.collection.Iterator<Tuple2<K, V>> iterator() {
        List<Tuple2<K, V>> all = new ArrayList<>();
        for (Map.Entry<InternalRow, InternalRow> e : state.entrySet()) {
          all.add(new Tuple2<>(keys.decode(e.getKey()), values.decode(e.getValue())));
        }
        return CollectionConverters.asScala(all.iterator());
      }

      @Override
      public scala.collection.Iterator<K> keys() {
        List<K> all = new ArrayList<>();
        for (InternalRow k : state.keySet()) {
          all.add(keys.decode(k));
        }
        return CollectionConverters.asScala(all.iterator());
      }

      @Override
      public scala.collection.Iterator<V> values() {
        List<V> all = new ArrayList<>();
        for (InternalRow v : state.values()) {
          all.add(values.decode(v));
        }
        return CollectionConverters.asScala(all.iterator());
      }

      @Override
      public void removeKey(K key) {
        state.remove(keys.encode(key));
      }

      @Override
      public void clear() {
        state.clear();
      }
    };
  }

  @Override
  public <K, V> MapState<K, V> getMapState(
      String name, TTLConfig ttl, Encoder<K> keyEncoder, Encoder<V> valueEncoder) {
    return getMapState(name, keyEncoder, valueEncoder, ttl);
  }

  @Override
  public <T> ListState<T> getListState(String name, Encoder<T> encoder, TTLConfig ttl) {
    throw new UnsupportedOperationException("the window engines keep no list state");
  }

  @Override
  public <T> ListState<T> getListState(String name, TTLConfig ttl, Encoder<T> encoder) {
    throw new UnsupportedOperationException("the window engines keep no list state");
  }

  @Override
  public QueryInfo getQueryInfo() {
    throw new UnsupportedOperationException();
  }

  @Override
  public void registerTimer(long expiryTimestampMs) {
    throw new UnsupportedOperationException("the window engines set no timers");
  }

  @Override
  public void deleteTimer(long expiryTimestampMs) {
    throw new UnsupportedOperationException("the window engines set no timers");
  }

  @Override
  public scala.collection.Iterator<Object> listTimers() {
    throw new UnsupportedOperationException("the window engines set no timers");
  }

  @Override
  public void deleteIfExists(String name) {
    states.remove(name);
  }
}
