# Benchmarks (issue 6): StreamApp vs hand-written PySpark vs Kafka Streams, on the embedded broker.
# Included by the top-level Makefile; `make bench` runs $(BENCH_CMD) (wired by the lead), and
# `make bench-run` is the same. Override the arguments, e.g.:
#   make bench BENCH_ARGS="--records 200000 --repeats 1"
# Run it on a quiet machine: the numbers are CPU-bound on 2 cores.

BENCH_DIR := tests/bench
BENCH_ARGS ?= --records 2000000 --repeats 3
BENCH_MVN := mvn -q -B -Dmaven.repo.local=$(STREAMAPP_CACHE)/m2
BENCH_CMD = $(PY) -m tests.bench.run $(BENCH_ARGS)

.PHONY: bench-run bench-kstreams bench-smoke bench-profile bench-eos bench-windowed bench-startup

$(BENCH_DIR)/kstreams/target/classpath.txt: $(BENCH_DIR)/kstreams/pom.xml $(wildcard $(BENCH_DIR)/kstreams/src/main/java/streamapp/bench/*.java)
	cd $(BENCH_DIR)/kstreams && $(BENCH_MVN) package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt

bench-kstreams: $(BENCH_DIR)/kstreams/target/classpath.txt ## build the Kafka Streams side of the benchmarks (Maven)

bench-run: setup bench-kstreams ## the full benchmark; results in tests/bench/results (RESULTS.md, results.json)
	$(BENCH_CMD)

# Start-up (issue 13's target: launch to first output within 10 s on 2 cores, stateless and word
# count): StreamApp and the hand-written job only, each run ending once the warm-up lines' output is
# complete, so that many interleaved launches fit in minutes.
STARTUP_ARGS ?= --repeats 6
bench-startup: setup ## start-up to first output, StreamApp vs the PySpark job; results in tests/bench/results/startup
	$(PY) -m tests.bench.run --startup-only --variants streamapp,pyspark --topologies stateless,wordcount \
		$(STARTUP_ARGS) --out tests/bench/results/startup

# The cost of exactly-once (issue 15's target: at most 1.3x the CPU per million records of
# at-least-once at a 1 s trigger) and the latency it adds: (a) and (e) alone, both at 1 s, both
# reading at most 500,000 records per micro-batch (exactly_once_v2's default bound) so that they
# run the same micro-batches: a word-count batch has a fixed cost of seconds of CPU, so a drain
# split in two costs about 1.6x one batch whatever the guarantee (measured: RESULTS.md).
EOS_ARGS ?= --records 1000000 --repeats 3 --latency-seconds 20 --max-offsets-per-trigger 500000 --settle-seconds 0
bench-eos: setup ## exactly_once_v2 vs at_least_once, both at commitIntervalMs 1000; results in tests/bench/results/eos
	$(PY) -m tests.bench.run --variants streamapp,streamapp-eos --commit-interval-ms 1000 $(EOS_ARGS) --out tests/bench/results/eos

# The stream-table join (issue 14): 1M stream records against a table of 100k keys, StreamApp
# beside Kafka Streams and a hand-written PySpark stream-static join. Smaller, for development:
#   make bench-join JOIN_ARGS="--records 100000 --table-keys 10000 --repeats 1"
JOIN_ARGS ?= --records 1000000 --table-keys 100000 --repeats 3
bench-join: setup bench-kstreams ## stream-table join, 1M records against 100k table keys; results in tests/bench/results/join
	$(PY) -m tests.bench.run --topologies join --variants streamapp,pyspark,kstreams $(JOIN_ARGS) --out tests/bench/results/join

bench-smoke: setup bench-kstreams ## a small benchmark run (20k records, 1 repeat, the join against 2k keys) written to build/bench-smoke
	$(PY) -m tests.bench.run --records 20000 --repeats 1 --latency-seconds 10 --warm-seconds 10 --topologies stateless,wordcount,join \
		--table-keys 2000 --settle-seconds 20 --out build/bench-smoke

PROFILE_ARGS ?= --records 1000000 --repeats 1 --latency-seconds 5 --warm-seconds 5 --settle-seconds 0
bench-profile: setup bench-kstreams ## where each variant's drain CPU goes: per-thread CPU + JFR, into build/bench-profile
	rm -rf build/bench-profile
	$(PY) -m tests.bench.run $(PROFILE_ARGS) --out build/bench-profile --profile build/bench-profile/profile
	$(PY) -m tests.bench.profiling build/bench-profile/profile | tee build/bench-profile/PROFILE.md

# Windowed aggregation at scale (issue 13): a tumbling 1-minute count with grace and a session count
# over 10k, 100k and 1M keys, StreamApp vs Spark's own window/session_window vs Kafka Streams.
# Smaller, for development:  make bench-windowed WINDOWED_ARGS="--keys 10000 --records 200000"
WINDOWED_ARGS ?= --keys 10000,100000,1000000 --records 2000000 --repeats 1
bench-windowed: setup bench-kstreams ## windowed counts at 10k/100k/1M keys; results in tests/bench/results/windowed
	$(PY) -m tests.bench.windowed $(WINDOWED_ARGS)
