"""Store backends."""
