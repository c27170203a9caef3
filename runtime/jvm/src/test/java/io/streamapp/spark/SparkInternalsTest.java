package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution;
import org.junit.jupiter.api.Test;

/**
 * What {@link SparkInternals} assumes of the Spark it is built against, checked against that
 * Spark's own classes: an upgrade that changes one fails here, by name.
 */
class SparkInternalsTest {
  @Test
  void theBatchIdPropertyIsTheOneSparksStreamThreadSets() {
    assertEquals(MicroBatchExecution.BATCH_ID_KEY(), SparkInternals.BATCH_ID_KEY);
  }

  @Test
  void utf8IsJudgedAsSparkJudgesIt() {
    assertTrue(SparkInternals.validUtf8("naïve €".getBytes(StandardCharsets.UTF_8)));
    assertFalse(SparkInternals.validUtf8(new byte[] {(byte) 0xc3, 0x28}));
    assertFalse(SparkInternals.validUtf8(new byte[] {(byte) 0xed, (byte) 0xa0, (byte) 0x80})); // a surrogate
  }
}
