package io.streamapp.spark;

import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Kafka's fixed-width serdes as Spark UDFs (registered by {@code codecs.py}): a number's bytes
 * written and read directly, where Spark SQL has no cast for them under ANSI mode and a
 * hex-string round trip ({@code unhex(lpad(hex(n), 16, '0'))}, {@code conv(hex(b), 16, -10)})
 * allocated two or three strings a value.
 */
public final class KafkaSerdes {
  private KafkaSerdes() {}

  /** Kafka's {@code LongSerializer}: 8 bytes, big-endian two's complement; null stays null. */
  public static final class LongBytes implements UDF1<Long, byte[]> {
    private static final long serialVersionUID = 1L;

    @Override
    public byte[] call(Long value) {
      if (value == null) {
        return null;
      }
      byte[] out = new byte[8];
      long v = value;
      for (int i = 7; i >= 0; i--) {
        out[i] = (byte) v;
        v >>>= 8;
      }
      return out;
    }
  }

  /** Kafka's {@code IntegerSerializer} of a value's low 32 bits: 4 bytes, big-endian. */
  public static final class IntBytes implements UDF1<Long, byte[]> {
    private static final long serialVersionUID = 1L;

    @Override
    public byte[] call(Long value) {
      if (value == null) {
        return null;
      }
      int v = (int) (long) value;
      return new byte[] {(byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) v};
    }
  }

  /** Kafka's {@code LongDeserializer}: 8 bytes big-endian; null for null or another length. */
  public static final class BytesLong implements UDF1<byte[], Long> {
    private static final long serialVersionUID = 1L;

    @Override
    public Long call(byte[] data) {
      if (data == null || data.length != 8) {
        return null;
      }
      long v = 0;
      for (byte b : data) {
        v = (v << 8) | (b & 0xFF);
      }
      return v;
    }
  }

  /** Kafka's {@code IntegerDeserializer}: 4 bytes big-endian; null for null or another length. */
  public static final class BytesInt implements UDF1<byte[], Integer> {
    private static final long serialVersionUID = 1L;

    @Override
    public Integer call(byte[] data) {
      if (data == null || data.length != 4) {
        return null;
      }
      return (data[0] << 24) | ((data[1] & 0xFF) << 16) | ((data[2] & 0xFF) << 8) | (data[3] & 0xFF);
    }
  }

  /** Kafka's {@code DoubleSerializer}: {@code doubleToLongBits} (one NaN), 8 bytes big-endian. */
  public static final class DoubleBytes implements UDF1<Double, byte[]> {
    private static final long serialVersionUID = 1L;
    private final LongBytes bits = new LongBytes();

    @Override
    public byte[] call(Double value) {
      return value == null ? null : bits.call(Double.doubleToLongBits(value));
    }
  }

  /** Kafka's {@code DoubleDeserializer}; null for null or another length than 8. */
  public static final class BytesDouble implements UDF1<byte[], Double> {
    private static final long serialVersionUID = 1L;
    private final BytesLong bits = new BytesLong();

    @Override
    public Double call(byte[] data) {
      Long v = bits.call(data);
      return v == null ? null : Double.longBitsToDouble(v);
    }
  }

  /**
   * The readable windowed key {@code <key>@<start>/<end>} (epoch ms) as UTF-8 bytes, from the
   * key's own UTF-8 text; null when the key is null.
   */
  public static final class WindowedKeyText implements UDF3<byte[], Long, Long, byte[]> {
    private static final long serialVersionUID = 1L;

    @Override
    public byte[] call(byte[] key, Long start, Long end) {
      if (key == null || start == null || end == null) {
        return null;
      }
      byte[] s = Long.toString(start).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
      byte[] e = Long.toString(end).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
      byte[] out = new byte[key.length + 2 + s.length + e.length];
      System.arraycopy(key, 0, out, 0, key.length);
      int at = key.length;
      out[at++] = '@';
      System.arraycopy(s, 0, out, at, s.length);
      at += s.length;
      out[at++] = '/';
      System.arraycopy(e, 0, out, at, e.length);
      return out;
    }
  }
}
