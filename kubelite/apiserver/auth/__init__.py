"""Authentication and authorization seams of the API server, after k8s.io/apiserver/pkg/authentication|authorization.

A request is authenticated by a chain of authenticators (x509 client certificates, static tokens,
service-account JWTs, then anonymous if enabled); the resulting `UserInfo` is attached to the
request (`request[kubelite.apiserver.app.USER]`). An `Authorizer` then decides on
`RequestAttributes` computed from the path as upstream's RequestInfoFactory does. RBAC plugs in as
another Authorizer (`AuthConfig.authorizer`).
"""
