"""pyqtgraph views: live loss and step-time plots, bar charts, plot export, theme."""
