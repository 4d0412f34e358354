"""What Ash reads from outside a typed message: voice notes, documents, web pages."""
