package io.streamapp.spark;

import org.apache.spark.sql.api.java.UDF1;

/**
 * The grouping key that puts task {@code t} in state partition {@code t mod n}, for every number
 * of state partitions {@code n}.
 *
 * <p>Spark places a group in the shuffle (and state store) partition {@code pmod(murmur3(key,
 * 42), n)}. Grouped by the task number itself, tasks collide: with 4 partitions, tasks 0, 1 and 3
 * all land in partition 3 (one core runs three quarters of the work while partitions 0 and 1 stay
 * empty); with 2, tasks 0 and 1 both land in partition 1. Spark's 32-bit Murmur3 of one int is a
 * bijection, so every task has exactly one key whose hash is the task number itself: that key is
 * {@link #of(int)}, the hash run backwards. Distinct tasks keep distinct keys, and a non-negative
 * task {@code t} lands in partition {@code t mod n}.
 */
public final class TaskKey implements UDF1<Integer, Integer> {
  private static final long serialVersionUID = 1L;

  /** The seed of Spark's {@code HashPartitioning} (and of the SQL {@code hash} function). */
  static final int SEED = 42;

  /** The key whose Murmur3 hash (seed 42, as Spark's {@code hashInt}) is {@code task}. */
  public static int of(int task) {
    int h = task;
    // fmix, backwards
    h ^= h >>> 16;
    h *= 0x7ed1b41d; // the inverse of 0xc2b2ae35 modulo 2^32
    h ^= (h >>> 13) ^ (h >>> 26);
    h *= 0xa5cb9243; // of 0x85ebca6b
    h ^= h >>> 16;
    h ^= 4; // the input's length in bytes
    // mixH1, backwards
    h = (h - 0xe6546b64) * 0xcccccccd; // of 5
    h = Integer.rotateRight(h, 13);
    int k1 = h ^ SEED;
    // mixK1, backwards
    k1 *= 0x56ed309b; // of 0x1b873593
    k1 = Integer.rotateRight(k1, 15);
    return k1 * 0xdee13bb1; // of 0xcc9e2d51
  }

  @Override
  public Integer call(Integer task) {
    return task == null ? null : of(task);
  }
}
