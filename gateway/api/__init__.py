"""HTTP only: parse, authorise, call a service, respond. One module per resource."""
