"""`make bench`: each stage's throughput beside a plain baseline measured in the same run.

Every figure prints as one line: BENCH <figure> value=<number> unit=<unit> baseline=<number> ratio=<number>
"""
