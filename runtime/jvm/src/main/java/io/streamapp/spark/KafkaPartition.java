package io.streamapp.spark;

import org.apache.kafka.common.utils.Utils;
import org.apache.spark.sql.api.java.UDF2;

/**
 * The partition Kafka's default partitioner gives a record with key bytes {@code key} among
 * {@code partitions}: murmur2 of the bytes, made positive, modulo the partitions — where Kafka
 * Streams writes a record to its repartition topic after a key change, so the task it lands in.
 */
public final class KafkaPartition implements UDF2<byte[], Integer, Integer> {
  private static final long serialVersionUID = 1L;

  @Override
  public Integer call(byte[] key, Integer partitions) {
    if (key == null || partitions == null) {
      return null;
    }
    return Utils.toPositive(Utils.murmur2(key)) % partitions;
  }
}
