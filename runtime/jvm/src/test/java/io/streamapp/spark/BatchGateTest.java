package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The stop gate (park at the boundary, fail on release) and the Lease fence. */
@Timeout(30)
class BatchGateTest {
  private final List<Long> written = new CopyOnWriteArrayList<>();
  private final AtomicLong writingSeen = new AtomicLong(-2);
  private final ExecutorService streamThread = Executors.newSingleThreadExecutor();
  private BatchGate gate;

  private BatchGate gate() {
    gate =
        new BatchGate(
            (rows, batchId) -> {
              writingSeen.set(gate.writing());
              written.add(batchId);
            });
    return gate;
  }

  @AfterEach
  void stop() {
    streamThread.shutdownNow();
  }

  /** Waits until {@code check} holds, as Python's gate does: {@code awaitChange} between looks. */
  private static void await(BatchGate gate, java.util.function.BooleanSupplier check) throws InterruptedException {
    while (!check.getAsBoolean()) {
      gate.awaitChange(50);
    }
  }

  @Test
  void anOpenGateLetsBatchesThroughAndTracksThem() throws Exception {
    BatchGate g = gate();
    assertEquals(-1, g.lastDone());
    g.call(null, 3L);
    g.call(null, 4L);
    assertEquals(List.of(3L, 4L), written);
    assertEquals(4, writingSeen.get()); // the batch is "writing" while its sink runs
    assertEquals(-1, g.writing());
    assertEquals(4, g.lastDone());
    assertEquals(-1, g.parked());
  }

  @Test
  void aFailedWriteStillLeavesTheGate() {
    BatchGate g =
        new BatchGate(
            (rows, batchId) -> {
              throw new IllegalStateException("broker gone");
            });
    assertThrows(IllegalStateException.class, () -> g.call(null, 7L));
    assertEquals(-1, g.writing());
    assertEquals(7, g.lastDone());
  }

  @Test
  void aClosedGateParksTheNextBatchUntilReleasedThenFailsItUnwritten() throws Exception {
    BatchGate g = gate();
    g.call(null, 1L);
    g.close();
    Future<?> batch =
        streamThread.submit(
            () -> {
              g.call(null, 2L);
              return null;
            });
    await(g, () -> g.parked() == 2);
    assertFalse(batch.isDone()); // parked, not failed: Spark must not start another batch
    g.release();
    ExecutionException failed = assertThrows(ExecutionException.class, () -> batch.get(10, TimeUnit.SECONDS));
    assertSame(BatchGate.StoppedAtBoundary.class, failed.getCause().getClass());
    // stopping.py recognises the failure by this text
    assertTrue(failed.getCause().getMessage().contains("micro-batch 2 was held before it started"));
    assertEquals(List.of(1L), written);
    assertEquals(1, g.lastDone()); // a parked batch never entered
  }

  @Test
  void anInterruptedParkedBatchStillWaitsForTheRelease() throws Exception {
    BatchGate g = gate();
    g.close();
    AtomicBoolean interruptedAfter = new AtomicBoolean();
    Thread stream =
        new Thread(
            () -> {
              try {
                g.enter(5);
              } catch (BatchGate.StoppedAtBoundary expected) {
                interruptedAfter.set(Thread.currentThread().isInterrupted());
              }
            });
    stream.start();
    await(g, () -> g.parked() == 5);
    stream.interrupt(); // query.stop() interrupts the stream thread
    stream.join(300);
    assertTrue(stream.isAlive(), "an interrupt does not let a parked batch go");
    g.release();
    stream.join(10_000);
    assertFalse(stream.isAlive());
    assertTrue(interruptedAfter.get(), "the interrupt is kept for Spark to see");
  }

  @Test
  void theFenceRefusesABatchOnceItsDeadlinePassed() throws Exception {
    BatchGate g = gate();
    g.fence(TimeUnit.SECONDS.toNanos(60), "the Lease's renewal is late");
    g.call(null, 1L); // within the deadline
    g.fence(0, "the Lease streamapp/app is held by driver-b");
    BatchGate.Fenced fenced = assertThrows(BatchGate.Fenced.class, () -> g.call(null, 2L));
    assertEquals(
        "micro-batch 2 not written: the Lease streamapp/app is held by driver-b", fenced.getMessage());
    assertEquals(List.of(1L), written);
    assertEquals(-1, g.writing());
    assertEquals(2, g.lastDone());
  }

  @Test
  void aDeadlineExpiresByItself() throws Exception {
    BatchGate g = gate();
    g.fence(TimeUnit.MILLISECONDS.toNanos(100), "no renewal for 2/3 of the Lease");
    g.call(null, 1L);
    Thread.sleep(200);
    assertThrows(BatchGate.Fenced.class, () -> g.call(null, 2L));
    g.fence(TimeUnit.SECONDS.toNanos(60), "renewed"); // a renewal moves it again
    g.call(null, 3L);
    assertEquals(List.of(1L, 3L), written);
  }
}
