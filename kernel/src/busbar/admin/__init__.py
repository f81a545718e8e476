"""The admin plane: a FastAPI app under ``/api/v1/admin`` on its own listener (``admin_listen``).

==================  =====================================================================
``server``          start/stop beside the data listener (store, audit, runtime groups, uvicorn)
``app``             the app: authentication, scopes, rate limits, the one error shape
``principal``       the admin credential and ``auth.admin_auth``
``scopes``          the scope each route needs; ``covers``
``keys``            the key service (mint, list, get, patch, revoke, rotate, delete)
``provision``       runtime (auto-provisioned) groups
``audit``           the hash-chained audit log and its verification
``openapi``         the committed OpenAPI 3.1 document (docs/admin-openapi.json)
``cli``             ``busbar admin ...``
``routes_*``        the route modules
==================  =====================================================================

Source: docs/admin.md.
"""
