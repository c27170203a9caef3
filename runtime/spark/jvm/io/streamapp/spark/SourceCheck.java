package io.streamapp.spark;

import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.api.java.UDF5;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The check that a source record's key and value are readable by their serdes ({@code string}:
 * valid UTF-8; {@code int}, {@code long}, {@code double}: 4, 8, 8 bytes), as two UDFs registered
 * per source by {@code codecs.readable}: {@link Valid1}/{@link Valid2} in the filter, and the
 * failure's message ({@link Message1}/{@link Message2}), evaluated only for a record that fails.
 *
 * <p>Why not SQL: the same check written as column expressions (a {@code CASE} with {@code
 * raise_error} and the message's {@code concat} per column) is about sixty expression nodes that
 * Spark's optimizer walks again every micro-batch; a stateless query planned 1-3 ms slower for them
 * than without a check. These are two nodes.
 */
public final class SourceCheck implements java.io.Serializable {
  private static final long serialVersionUID = 1L;

  private final String[] names;
  private final String[] serdes;

  /** {@code names[i]} (the column, e.g. {@code key}) is read with {@code serdes[i]}. */
  public SourceCheck(String[] names, String[] serdes) {
    if (names.length != serdes.length || names.length < 1 || names.length > 2) {
      throw new IllegalArgumentException("one or two columns, each with its serde");
    }
    for (String serde : serdes) {
      if (width(serde) == 0 && !serde.equals("string")) {
        throw new IllegalArgumentException("no check for the " + serde + " serde here");
      }
    }
    this.names = names.clone();
    this.serdes = serdes.clone();
  }

  private static int width(String serde) {
    switch (serde) {
      case "int":
        return 4;
      case "long":
      case "double":
        return 8;
      default:
        return 0;
    }
  }

  /** Why {@code bytes} are not a valid {@code serde} encoding; null when valid (or null). */
  static String problem(String serde, byte[] bytes) {
    if (bytes == null) {
      return null;
    }
    int width = width(serde);
    if (width > 0) {
      return bytes.length == width
          ? null
          : "a " + serde + " is " + width + " bytes, this value has " + bytes.length;
    }
    return UTF8String.fromBytes(bytes).isValid() ? null : "not valid UTF-8";
  }

  boolean valid(byte[]... columns) {
    for (int i = 0; i < columns.length; i++) {
      if (problem(serdes[i], columns[i]) != null) {
        return false;
      }
    }
    return true;
  }

  String message(String topic, Integer partition, Long offset, byte[]... columns) {
    for (int i = 0; i < columns.length; i++) {
      String problem = problem(serdes[i], columns[i]);
      if (problem != null) {
        return names[i] + " of record " + topic + "/" + partition + "@" + offset
            + " cannot be read with the " + serdes[i] + " serde: " + problem
            + " (deserializationErrors: fail)";
      }
    }
    return null;
  }

  /** Whether one column is readable. */
  public static final class Valid1 implements UDF1<byte[], Boolean> {
    private static final long serialVersionUID = 1L;
    private final SourceCheck check;

    public Valid1(SourceCheck check) {
      this.check = check;
    }

    @Override
    public Boolean call(byte[] a) {
      return check.valid(a);
    }
  }

  /** Whether both columns are readable. */
  public static final class Valid2 implements UDF2<byte[], byte[], Boolean> {
    private static final long serialVersionUID = 1L;
    private final SourceCheck check;

    public Valid2(SourceCheck check) {
      this.check = check;
    }

    @Override
    public Boolean call(byte[] a, byte[] b) {
      return check.valid(a, b);
    }
  }

  /** Why the record (its column, topic, partition, offset) is not readable; null if it is. */
  public static final class Message1 implements UDF4<byte[], String, Integer, Long, String> {
    private static final long serialVersionUID = 1L;
    private final SourceCheck check;

    public Message1(SourceCheck check) {
      this.check = check;
    }

    @Override
    public String call(byte[] a, String topic, Integer partition, Long offset) {
      return check.message(topic, partition, offset, a);
    }
  }

  /** Why the record (its two columns, topic, partition, offset) is not readable; null if it is. */
  public static final class Message2 implements UDF5<byte[], byte[], String, Integer, Long, String> {
    private static final long serialVersionUID = 1L;
    private final SourceCheck check;

    public Message2(SourceCheck check) {
      this.check = check;
    }

    @Override
    public String call(byte[] a, byte[] b, String topic, Integer partition, Long offset) {
      return check.message(topic, partition, offset, a, b);
    }
  }
}
