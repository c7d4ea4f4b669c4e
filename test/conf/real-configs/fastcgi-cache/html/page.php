<?php
header('Cache-Control: no-cache');
header('Set-Cookie: seen=1; path=/');
echo "page for ", $_SERVER['REQUEST_URI'], "\n";
