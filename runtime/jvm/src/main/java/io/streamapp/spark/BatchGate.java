package io.streamapp.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * The stop gate and the Lease fence of {@code stopping.py}'s {@code Gate} in the driver's JVM, run
 * by Spark's stream thread with no call into Python per micro-batch (a Python {@code foreachBatch}
 * doing nothing costs 12-16 ms a batch): entered and left by {@link KafkaSink} (at least once), or
 * the {@code foreachBatch} function around the exactly-once writer ({@link #call}).
 *
 * <p>The gate: until {@link #close} a batch goes through to the sink ({@link #writing} is its id
 * meanwhile, {@link #lastDone} after); once closed, the next batch parks before it reads anything,
 * and fails with {@link StoppedAtBoundary} when {@link #release}d, so Spark records no commit for it
 * and runs it, whole, after a restart. {@code stopping.graceful_stop} drives it from Python.
 *
 * <p>The fence: a driver holding the app's Lease may write until its last renewal plus two thirds
 * of the Lease's duration. Python pushes that deadline after every renewal ({@link #fence}); a
 * batch starting past it, or after the Lease was lost, fails with {@link Fenced} before it writes.
 */
public final class BatchGate implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;

  /** Fails a parked batch so that Spark does not commit it (the name is what Python looks for). */
  public static final class StoppedAtBoundary extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StoppedAtBoundary(String message) {
      super(message);
    }
  }

  /** Fails a batch this driver may not write: it does not hold the app's Lease. */
  public static final class Fenced extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Fenced(String message) {
      super(message);
    }
  }

  /** The time (System.nanoTime) writes stop being allowed, and why they are not after it. */
  private static final class Deadline {
    final long nanos;
    final String reason;

    Deadline(long nanos, String reason) {
      this.nanos = nanos;
      this.reason = reason;
    }
  }

  private final transient VoidFunction2<Dataset<Row>, Long> sink;
  private final transient Object lock = new Object();
  private boolean closed;
  private boolean released;
  private long writing = -1; // the batch whose sink write is in flight
  private long parked = -1; // the batch held at the closed gate
  private long lastDone = -1;
  private volatile Deadline fence; // null: no fence (local runs)

  public BatchGate(VoidFunction2<Dataset<Row>, Long> sink) {
    this.sink = sink;
  }

  /** A gate around {@link KafkaRecordWriter} (at least once). */
  public static BatchGate kafka(Map<String, String> config) {
    return new BatchGate((rows, batchId) -> KafkaRecordWriter.write(rows, config));
  }

  /**
   * A gate around {@link TransactionalRecordWriter} (exactly once); the marker's metadata of batch
   * {@code n} is {@code metadataHead + n + metadataTail}. A replayed batch whose partitions were
   * committed before a restart says so on the driver's standard output.
   */
  public static BatchGate exactlyOnce(
      Map<String, String> config,
      String transactionalPrefix,
      String markerTopic,
      String markerGroup,
      String metadataHead,
      String metadataTail) {
    return new BatchGate(
        (rows, batchId) -> {
          List<long[]> outcomes =
              TransactionalRecordWriter.write(
                  rows,
                  config,
                  transactionalPrefix,
                  markerTopic,
                  markerGroup,
                  batchId,
                  metadataHead + batchId + metadataTail);
          List<Long> skipped = new ArrayList<>();
          for (long[] outcome : outcomes) {
            if (outcome[2] != 0) {
              skipped.add(outcome[0]);
            }
          }
          if (!skipped.isEmpty()) {
            skipped.sort(null);
            System.out.println(
                "micro-batch "
                    + batchId
                    + ": partition(s) "
                    + skipped
                    + " were committed before a restart; not written again");
            System.out.flush();
          }
        });
  }

  @Override
  public void call(Dataset<Row> rows, Long batchId) throws Exception {
    enter(batchId);
    try {
      sink.call(rows, batchId);
    } finally {
      exit(batchId);
    }
  }

  /**
   * Batch {@code batchId} is about to write: returns once it may (it is then {@link #writing}), or
   * throws {@link StoppedAtBoundary} (the gate was closed: it parked until {@link #release}) or
   * {@link Fenced} (past the fence's deadline). Every return is followed by {@link #exit}.
   */
  public void enter(long batchId) {
    synchronized (lock) {
      if (closed) {
        parked = batchId;
        lock.notifyAll();
        // query.stop() interrupts this thread while it is parked: it still waits for the release,
        // as the Python gate does, so that the batch fails with StoppedAtBoundary.
        boolean interrupted = false;
        while (!released) {
          try {
            lock.wait();
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
        throw new StoppedAtBoundary( // stopping.py recognises the failure by this message
            "micro-batch "
                + batchId
                + " was held before it started because the query is stopping; it runs on restart");
      }
      writing = batchId;
    }
    Deadline until = fence;
    if (until != null && System.nanoTime() - until.nanos >= 0) {
      exit(batchId);
      throw new Fenced("micro-batch " + batchId + " not written: " + until.reason);
    }
  }

  /** Batch {@code batchId}'s write is over (done or failed). */
  public void exit(long batchId) {
    synchronized (lock) {
      writing = -1;
      lastDone = batchId;
      lock.notifyAll();
    }
  }

  /**
   * Writes are allowed for {@code remainingNanos} from now (none if it is not positive); past
   * that, a batch fails with {@code reason}.
   */
  public void fence(long remainingNanos, String reason) {
    long now = System.nanoTime();
    fence = new Deadline(remainingNanos > 0 ? now + remainingNanos : now, reason);
  }

  public void close() {
    synchronized (lock) {
      closed = true;
    }
  }

  /** Lets a parked batch go (it fails with {@link StoppedAtBoundary}). */
  public void release() {
    synchronized (lock) {
      released = true;
      lock.notifyAll();
    }
  }

  /** Waits at most {@code millis} for a batch to start, finish or park. */
  public void awaitChange(long millis) throws InterruptedException {
    synchronized (lock) {
      lock.wait(Math.max(1, millis));
    }
  }

  /** The batch whose sink write is in flight, -1 if none. */
  public long writing() {
    synchronized (lock) {
      return writing;
    }
  }

  /** The batch held at the closed gate, -1 if none. */
  public long parked() {
    synchronized (lock) {
      return parked;
    }
  }

  /** The last batch whose sink write completed (or failed), -1 if none. */
  public long lastDone() {
    synchronized (lock) {
      return lastDone;
    }
  }
}
