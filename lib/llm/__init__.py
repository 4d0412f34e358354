"""Model providers behind one interface, and the one retry and fallback policy (router)."""
