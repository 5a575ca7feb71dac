"""The offline end-to-end demo and its sample corpus about Northwind Harbor Logistics."""
