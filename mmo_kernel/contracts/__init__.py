"""The contract-transport kit: output-contract schemas, their checks and schema instances.
"""
