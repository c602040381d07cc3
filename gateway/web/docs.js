// Swagger UI on the gateway's own OpenAPI document; assets come from the gateway (the
// swagger-ui-bundle-v2 package), and the online validator badge is off, so nothing leaves it.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  // The key typed into "Authorize" is not written to localStorage: it goes with the page.
  persistAuthorization: false,
  displayRequestDuration: true,
  defaultModelsExpandDepth: 0,
  docExpansion: "list",
  filter: true,
});
