"""User logic checked without a JVM: Spark SQL expressions (sqlglot), schemas and function references.

See :mod:`streamapp.runtime.expressions.check`; the graph checks in
:mod:`streamapp.runtime.topology.validate` call it with what is known of each record.
"""
