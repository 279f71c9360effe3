"""The stack's schema registry, Apicurio Registry: its application fetched from Maven Central
(``app``), who may use it (``principals``) and its process (``server``)."""
