"""pagos: charges on StockVerificado, refunds on FalloAsignacion or cancellation; every gateway
call happens outside a database transaction and every wait is a row with its next attempt time."""
