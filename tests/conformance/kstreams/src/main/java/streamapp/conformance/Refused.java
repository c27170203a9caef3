package streamapp.conformance;

/**
 * A graph the oracle will not build: a construct, field value or piece of logic that has no
 * Kafka Streams twin here. The message names the node and the field; the Oracle reports it as
 * the run's {@code error} and goes on with the other runs.
 */
final class Refused extends RuntimeException {
  private static final long serialVersionUID = 1L;

  Refused(String message) {
    super(message);
  }
}
