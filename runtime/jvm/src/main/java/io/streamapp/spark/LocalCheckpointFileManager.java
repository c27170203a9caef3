package io.streamapp.spark;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.FileSystemException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;

/**
 * Streaming checkpoint files on a local disk through {@code java.nio}: the offset and commit logs,
 * the sources' metadata and the state stores' changelog and snapshot files of every micro-batch.
 *
 * <p>Spark's default manager goes through Hadoop's local file system, which writes a {@code .crc}
 * side file next to each file and, without Hadoop's native library (not in the pyspark wheel),
 * starts a process per file: {@code chmod} for each file created and {@code readlink} for each
 * rename — measured with strace, a rate source to Spark's noop sink: ~22 processes per micro-batch
 * on the driver, on top of the state stores' own. Here a file is written to a hidden temporary
 * file in its folder and published with one system call: {@code link(2)} when it must not replace
 * an existing file (fails atomically if one is there, as Spark's contract asks:
 * {@link FileAlreadyExistsException}), {@code rename(2)} when it may. No side file, no process.
 * Like Hadoop's local file system, nothing is synced to the device: a file is durable against a
 * process crash, not a power loss.
 *
 * <p>The publish without replacing is what refuses a second writer: two drivers that run one
 * checkpoint (a driver that lost its Lease and the one that took over) both write the offset log's
 * file of the next batch, and the second to publish fails instead of replacing the first's.
 *
 * <p>A path on any other file system (HDFS, an object store) goes to Spark's own manager for it,
 * unchanged ({@link SparkInternals.CheckpointFiles}, which implements Spark's interface). Set as
 * {@code spark.sql.streaming.checkpointFileManagerClass}.
 */
public final class LocalCheckpointFileManager extends SparkInternals.CheckpointFiles {
  private static final int BUFFER = 64 * 1024;

  public LocalCheckpointFileManager(Path path, Configuration conf) {
    super(path, conf);
  }

  @Override
  protected SparkInternals.CheckpointFiles.AtomicWrite beginAtomic(Path path, boolean overwrite)
      throws IOException {
    java.nio.file.Path target = file(path);
    java.nio.file.Path temp =
        target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    OutputStream out;
    try {
      out = Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    } catch (NoSuchFileException missingFolder) {
      Files.createDirectories(target.getParent());
      out = Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    }
    return new AtomicFile(new BufferedOutputStream(out, BUFFER), temp, target, overwrite);
  }

  @Override
  protected void mkdirsLocal(Path path) throws IOException {
    Files.createDirectories(file(path));
  }

  @Override
  protected boolean existsLocal(Path path) {
    return Files.exists(file(path));
  }

  @Override
  protected void deleteLocal(Path path) throws IOException {
    deleteTree(file(path));
  }

  private java.nio.file.Path file(Path path) {
    return local.pathToFile(path).toPath();
  }

  /** Hadoop's checksum side file of {@code file} (Spark's own manager writes one per file). */
  private static java.nio.file.Path checksumOf(java.nio.file.Path file) {
    return file.resolveSibling("." + file.getFileName() + ".crc");
  }

  private static void deleteTree(java.nio.file.Path top) throws IOException {
    if (!Files.isDirectory(top, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      Files.deleteIfExists(top);
      Files.deleteIfExists(checksumOf(top));
      return;
    }
    try {
      Files.walkFileTree(top, new SimpleFileVisitor<java.nio.file.Path>() {
        @Override
        public FileVisitResult visitFile(java.nio.file.Path f, BasicFileAttributes attrs)
            throws IOException {
          Files.deleteIfExists(f);
          return FileVisitResult.CONTINUE;
        }

        @Override
        public FileVisitResult postVisitDirectory(java.nio.file.Path d, IOException e)
            throws IOException {
          if (e != null && !(e instanceof NoSuchFileException)) {
            throw e;
          }
          Files.deleteIfExists(d);
          return FileVisitResult.CONTINUE;
        }
      });
    } catch (NoSuchFileException gone) {
      // deleted meanwhile: nothing left to delete
    }
  }

  /** Written to {@code temp}; published as {@code target} in one system call. */
  private static final class AtomicFile implements SparkInternals.CheckpointFiles.AtomicWrite {
    private final OutputStream out;
    private final java.nio.file.Path temp;
    private final java.nio.file.Path target;
    private final boolean overwrite;

    AtomicFile(OutputStream out, java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) {
      this.out = out;
      this.temp = temp;
      this.target = target;
      this.overwrite = overwrite;
    }

    @Override
    public OutputStream stream() {
      return out;
    }

    @Override
    public java.nio.file.Path target() {
      return target;
    }

    @Override
    public void publish() throws IOException {
      if (overwrite) {
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);  // rename(2) replaces
        // A checksum Hadoop wrote for the replaced file (a checkpoint begun with Spark's own
        // manager) would no longer match: Spark's manager would then refuse to read the file.
        Files.deleteIfExists(checksumOf(target));
        return;
      }
      try {
        Files.createLink(target, temp);  // link(2): fails if the target exists, atomically
      } catch (java.nio.file.FileAlreadyExistsException exists) {
        throw new FileAlreadyExistsException(target + " already exists (not replaced)");
      } catch (UnsupportedOperationException | FileSystemException noLinks) {
        // A file system without hard links: check, then rename (Hadoop's own order).
        if (Files.exists(target)) {
          throw new FileAlreadyExistsException(target + " already exists (not replaced)");
        }
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
      }
    }

    @Override
    public void removeTemporary() throws IOException {
      Files.deleteIfExists(temp);
    }
  }
}
