package io.streamapp.spark;

import org.apache.spark.sql.api.java.UDF6;

/**
 * Why a source record cannot be read by its serdes, as a UDF that {@code codecs.readable} calls
 * only for a record its SQL check failed: the check stays SQL (generated code, and the cast of a
 * string column shared with its decoding), and the message, which names the record and the
 * column, is one expression node in the plan instead of a tree of {@code concat}s that Spark's
 * optimizer walks again every micro-batch.
 *
 * <p>Arguments: the columns' spec ({@code "key:int;value:string"}, in the order checked; one or
 * two columns, {@code string}, {@code int}, {@code long}, {@code double} serdes), the first and
 * second column's bytes (the second null when the spec has one), the record's topic, partition
 * and offset. The message is null when every column is readable.
 */
public final class SourceProblem
    implements UDF6<String, byte[], byte[], String, Integer, Long, String> {
  private static final long serialVersionUID = 1L;

  private static int width(String serde) {
    switch (serde) {
      case "int":
        return 4;
      case "long":
      case "double":
        return 8;
      case "string":
        return 0;
      default:
        throw new IllegalArgumentException("no readability message for the " + serde + " serde");
    }
  }

  /** Why {@code bytes} are not a valid {@code serde} encoding; null when valid (or null). */
  static String problem(String serde, byte[] bytes) {
    int width = width(serde);
    if (bytes == null) {
      return null;
    }
    if (width > 0) {
      return bytes.length == width
          ? null
          : "a " + serde + " is " + width + " bytes, this value has " + bytes.length;
    }
    return SparkInternals.validUtf8(bytes) ? null : "not valid UTF-8";
  }

  @Override
  public String call(
      String spec, byte[] first, byte[] second, String topic, Integer partition, Long offset) {
    String[] columns = spec.split(";");
    for (int i = 0; i < columns.length; i++) {
      String[] column = columns[i].split(":", 2);
      String problem = problem(column[1], i == 0 ? first : second);
      if (problem != null) {
        return column[0] + " of record " + topic + "/" + partition + "@" + offset
            + " cannot be read with the " + column[1] + " serde: " + problem
            + " (deserializationErrors: fail)";
      }
    }
    return null;
  }
}
