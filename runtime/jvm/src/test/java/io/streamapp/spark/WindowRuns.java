package io.streamapp.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Runs a window engine's processor over micro-batches of one task's records, as {@code
 * transformWithState} does (one group per task, its state in a {@link StateStore}), and shows its
 * output rows as text: {@code kind key start end value @ts}.
 */
final class WindowRuns {
  private WindowRuns() {}

  /** The engines' input columns (KeyedWindows.byTask): text keys as their UTF-8 bytes. */
  static final StructType INPUT =
      new StructType()
          .add("key", DataTypes.BinaryType, true)
          .add("value", DataTypes.LongType, true)
          .add("ts", DataTypes.LongType, false)
          .add("partition", DataTypes.IntegerType, true)
          .add("offset", DataTypes.LongType, true)
          .add("sub", DataTypes.LongType, false)
          .add("task_key", DataTypes.IntegerType, true);

  /** A record of source partition ({@code sub}) 0. */
  static Row record(String key, Long value, long ts, long offset) {
    return record(key, value, ts, 0, offset);
  }

  static Row record(String key, Long value, long ts, long sub, long offset) {
    return RowFactory.create(
        key.getBytes(StandardCharsets.UTF_8), value, ts, (int) sub, offset, sub, 0);
  }

  /** A processor started on {@code store} (a new one on the same store: a restart). */
  static <P extends StatefulProcessor<Integer, Row, Row>> P started(P processor, StateStore store) {
    processor.setHandle(store);
    processor.init(OutputMode.Append(), TimeMode.None());
    return processor;
  }

  /** One micro-batch of {@code records} through {@code processor}: its output rows as text. */
  static List<String> batch(StatefulProcessor<Integer, Row, Row> processor, Row... records) {
    scala.collection.Iterator<Row> out =
        processor.handleInputRows(0, CollectionConverters.asScala(Arrays.asList(records).iterator()), null);
    List<String> shown = new ArrayList<>();
    out.foreach(
        row -> {
          shown.add(show(row));
          return null;
        });
    return shown;
  }

  /** {@code kind key start end value @ts}; a null value (late, tombstone) as {@code -}. */
  static String show(Row row) {
    Object key = row.get(1);
    String text = key instanceof byte[] ? new String((byte[]) key, StandardCharsets.UTF_8) : String.valueOf(key);
    Object value = row.get(4);
    return row.getString(0) + " " + text + " " + row.getLong(2) + " " + row.getLong(3) + " "
        + (value == null ? "-" : value) + " @" + row.getLong(5);
  }
}
