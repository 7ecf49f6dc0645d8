"""The attribution on Apache Spark: the same SQL over the lake read through Hadoop."""
