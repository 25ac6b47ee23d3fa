"""Custom resources: CustomResourceDefinitions' schemas, their objects' strategy, and serving them at run time.

apiextensions-apiserver's pieces, each in a module: `schema` (structural schemas: validation, pruning, defaulting
of objects), `definitions` (the CRD kind's own validation), `strategy` (a custom resource's registry strategy) and
`serving` (the controller that accepts names, establishes CRDs and registers their resources with the server).
"""
