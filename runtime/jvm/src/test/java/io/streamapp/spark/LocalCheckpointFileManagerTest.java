package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Spark's checkpoint file contract on a local disk: atomic publish, no second writer of a file that
 * must not be replaced, replace when allowed, cancel leaves nothing, and no Hadoop side files.
 */
class LocalCheckpointFileManagerTest {
  @TempDir java.nio.file.Path dir;
  private LocalCheckpointFileManager files;

  @BeforeEach
  void open() {
    files = new LocalCheckpointFileManager(new Path(dir.toUri()), new Configuration());
  }

  private Path path(String relative) {
    return new Path(dir.resolve(relative).toUri());
  }

  private static void write(java.io.OutputStream out, String text) throws IOException {
    out.write(text.getBytes(StandardCharsets.UTF_8));
  }

  private List<String> names(String folder) throws IOException {
    try (Stream<java.nio.file.Path> listed = Files.list(dir.resolve(folder))) {
      return listed.map(p -> p.getFileName().toString()).sorted().toList();
    }
  }

  @Test
  void aFileAppearsWholeOnCloseInAFolderMadeForIt() throws IOException {
    var out = files.createAtomic(path("offsets/0"), false);
    write(out, "v1\n{}");
    assertFalse(Files.exists(dir.resolve("offsets/0")), "nothing is visible before close");
    out.close();
    assertEquals("v1\n{}", Files.readString(dir.resolve("offsets/0")));
    assertEquals(List.of("0"), names("offsets")); // no temporary file, no .crc
    assertTrue(files.exists(path("offsets/0")));
    assertTrue(files.isLocal());
  }

  @Test
  void aSecondWriterOfAFileThatMustNotBeReplacedIsRefused() throws IOException {
    // Two drivers on one checkpoint write the offset log's next batch: the second must fail.
    var first = files.createAtomic(path("offsets/7"), false);
    var second = files.createAtomic(path("offsets/7"), false);
    write(first, "driver-a");
    write(second, "driver-b");
    first.close();
    FileAlreadyExistsException refused = assertThrows(FileAlreadyExistsException.class, second::close);
    assertTrue(refused.getMessage().contains("offsets/7 already exists"), refused.getMessage());
    assertEquals("driver-a", Files.readString(dir.resolve("offsets/7")));
    assertEquals(List.of("7"), names("offsets"));
  }

  @Test
  void ofWritersRacingForOneFileExactlyOneWins() throws Exception {
    int writers = 8;
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    CountDownLatch ready = new CountDownLatch(writers);
    List<Future<Boolean>> outcomes = new ArrayList<>();
    for (int i = 0; i < writers; i++) {
      String text = "writer-" + i;
      Callable<Boolean> writer =
          () -> {
            var out = files.createAtomic(path("commits/3"), false);
            write(out, text);
            ready.countDown();
            ready.await();
            try {
              out.close();
              return true;
            } catch (FileAlreadyExistsException lost) {
              return false;
            }
          };
      outcomes.add(pool.submit(writer));
    }
    List<Integer> winners = new ArrayList<>();
    for (int i = 0; i < writers; i++) {
      if (outcomes.get(i).get()) {
        winners.add(i);
      }
    }
    pool.shutdown();
    assertEquals(1, winners.size(), "winners: " + winners);
    assertEquals("writer-" + winners.get(0), Files.readString(dir.resolve("commits/3")));
    assertEquals(List.of("3"), names("commits"));
  }

  @Test
  void aFileThatMayBeReplacedIsReplacedAndItsStaleChecksumGoes() throws IOException {
    Files.createDirectories(dir.resolve("state/0/0"));
    Files.writeString(dir.resolve("state/0/0/1.delta"), "old");
    Files.writeString(dir.resolve("state/0/0/.1.delta.crc"), "checksum of old");
    var out = files.createAtomic(path("state/0/0/1.delta"), true);
    write(out, "new");
    out.close();
    assertEquals("new", Files.readString(dir.resolve("state/0/0/1.delta")));
    assertEquals(List.of("1.delta"), names("state/0/0"));
  }

  @Test
  void aCancelledFileLeavesNothingAndACloseAfterItNothingEither() throws IOException {
    var out = files.createAtomic(path("offsets/1"), false);
    write(out, "partial");
    out.cancel();
    out.close();
    assertEquals(List.of(), names("offsets"));
  }

  @Test
  void listOpenAndDeleteGoThroughTheLocalDisk() throws IOException {
    for (String name : List.of("0", "1", "2")) {
      var out = files.createAtomic(path("offsets/" + name), false);
      write(out, "batch " + name);
      out.close();
    }
    PathFilter notOne = p -> !p.getName().equals("1");
    FileStatus[] listed = files.list(path("offsets"), notOne);
    assertEquals(
        List.of("0", "2"), Arrays.stream(listed).map(s -> s.getPath().getName()).sorted().toList());
    try (FSDataInputStream in = files.open(path("offsets/2"))) {
      assertArrayEquals("batch 2".getBytes(StandardCharsets.UTF_8), in.readAllBytes());
    }
    assertThrows(FileNotFoundException.class, () -> files.open(path("offsets/9")));

    Files.writeString(dir.resolve("offsets/.2.crc"), "a checksum Spark's own manager wrote");
    files.delete(path("offsets/2"));
    assertEquals(List.of("0", "1"), names("offsets"));
    files.delete(path("offsets/2")); // already gone: no error
    files.delete(path("offsets"));
    assertFalse(Files.exists(dir.resolve("offsets")));
  }

  @Test
  void theCheckpointFolderIsMadeAndQualified() {
    Path made = files.createCheckpointDirectory();
    assertEquals("file", made.toUri().getScheme());
    assertTrue(Files.isDirectory(dir));
    files.mkdirs(path("sources/0"));
    assertTrue(Files.isDirectory(dir.resolve("sources/0")));
  }
}
