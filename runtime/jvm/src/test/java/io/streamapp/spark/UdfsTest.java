package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.serialization.DoubleDeserializer;
import org.apache.kafka.common.serialization.DoubleSerializer;
import org.apache.kafka.common.serialization.IntegerDeserializer;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.junit.jupiter.api.Test;

/**
 * The UDFs against what they stand for: Kafka's own serdes and partitioner, Spark's hash
 * partitioning, and the message a record's reader fails with.
 */
class UdfsTest {
  private final Random random = new Random(49);

  @Test
  void numberSerdesAreKafkas() {
    long[] longs = {0, -1, 1, Long.MIN_VALUE, Long.MAX_VALUE, random.nextLong(), random.nextLong()};
    try (LongSerializer ls = new LongSerializer();
        LongDeserializer ld = new LongDeserializer();
        IntegerSerializer is = new IntegerSerializer();
        IntegerDeserializer id = new IntegerDeserializer()) {
      for (long v : longs) {
        byte[] kafka = ls.serialize("t", v);
        assertArrayEquals(kafka, new KafkaSerdes.LongBytes().call(v));
        assertEquals(ld.deserialize("t", kafka), new KafkaSerdes.BytesLong().call(kafka));
        // IntegerSerializer of the value's low 32 bits (an int column widened to bigint).
        byte[] kafkaInt = is.serialize("t", (int) v);
        assertArrayEquals(kafkaInt, new KafkaSerdes.IntBytes().call(v));
        assertEquals(id.deserialize("t", kafkaInt), new KafkaSerdes.BytesInt().call(kafkaInt));
      }
    }
    try (DoubleSerializer ds = new DoubleSerializer();
        DoubleDeserializer dd = new DoubleDeserializer()) {
      for (double v : new double[] {0.0, -0.0, 1.5, Double.NaN, Double.NEGATIVE_INFINITY, random.nextDouble()}) {
        byte[] kafka = ds.serialize("t", v);
        assertArrayEquals(kafka, new KafkaSerdes.DoubleBytes().call(v));
        assertEquals(dd.deserialize("t", kafka), new KafkaSerdes.BytesDouble().call(kafka));
      }
    }
  }

  @Test
  void bytesOfAnotherWidthOrNullReadAsNull() {
    assertNull(new KafkaSerdes.BytesLong().call(new byte[4]));
    assertNull(new KafkaSerdes.BytesInt().call(new byte[8]));
    assertNull(new KafkaSerdes.BytesDouble().call(null));
    assertNull(new KafkaSerdes.LongBytes().call(null));
  }

  @Test
  void aWindowedKeyReadsAsKeyAtStartSlashEnd() {
    byte[] text = new KafkaSerdes.WindowedKeyText().call("clé".getBytes(StandardCharsets.UTF_8), 0L, 60_000L);
    assertEquals("clé@0/60000", new String(text, StandardCharsets.UTF_8));
    assertNull(new KafkaSerdes.WindowedKeyText().call(null, 0L, 1L));
  }

  @Test
  void kafkaPartitionIsTheDefaultPartitionersChoice() {
    KafkaPartition udf = new KafkaPartition();
    for (int i = 0; i < 500; i++) {
      byte[] key = new byte[random.nextInt(12)];
      random.nextBytes(key);
      int partitions = 1 + random.nextInt(64);
      assertEquals(BuiltInPartitioner.partitionForKey(key, partitions), udf.call(key, partitions));
    }
    assertNull(udf.call(null, 4));
  }

  @Test
  void taskKeyPutsTaskTInStatePartitionTModNForEveryN() {
    Set<Integer> keys = new HashSet<>();
    for (int task = 0; task < 1000; task++) {
      int key = TaskKey.of(task);
      keys.add(key);
      // Spark's HashPartitioning of an int grouping key: pmod(murmur3(key, 42), n)
      int hash = Murmur3_x86_32.hashInt(key, TaskKey.SEED);
      for (int n = 1; n <= 16; n++) {
        assertEquals(task % n, Math.floorMod(hash, n), "task " + task + " of " + n);
      }
    }
    assertEquals(1000, keys.size());
  }

  @Test
  void sourceProblemNamesTheRecordTheColumnAndWhy() {
    SourceProblem udf = new SourceProblem();
    String spec = "key:int;value:string";
    assertNull(udf.call(spec, new byte[4], "ok".getBytes(StandardCharsets.UTF_8), "in", 0, 5L));
    assertEquals(
        "key of record in/2@17 cannot be read with the int serde: a int is 4 bytes, this value has 3"
            + " (deserializationErrors: fail)",
        udf.call(spec, new byte[3], null, "in", 2, 17L));
    assertEquals(
        "value of record in/0@1 cannot be read with the string serde: not valid UTF-8"
            + " (deserializationErrors: fail)",
        udf.call(spec, new byte[4], new byte[] {(byte) 0xc3, 0x28}, "in", 0, 1L));
    assertThrows(IllegalArgumentException.class, () -> udf.call("key:avro", new byte[1], null, "in", 0, 0L));
  }
}
