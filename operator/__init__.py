"""StreamApp operator: reconciles ``StreamApp`` resources into Spark-on-Kubernetes drivers.

Layers, each importing only the ones below it: ``handlers`` (kopf) → ``reconcile`` → the pure
``validation``, ``scaling``, ``desired``/``sparkconf`` and ``status`` → the adapters ``cluster``
(kubernetes client) and ``kafka_probe`` (confluent-kafka). Importing this package imports nothing:
it never pulls in kopf, the kubernetes client or pyspark until a module asks for them.
"""
