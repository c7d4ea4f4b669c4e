<?php
header('Content-Type: text/html; charset=UTF-8');
header('X-Pingback: http://localhost/xmlrpc.php');
echo "<h1>WordPress</h1>\n";
foreach (['REQUEST_URI', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'QUERY_STRING', 'PATH_INFO', 'DOCUMENT_URI', 'REQUEST_METHOD'] as $k) {
    echo "$k=", str_replace($_SERVER['DOCUMENT_ROOT'], 'ROOT', $_SERVER[$k] ?? '-'), "\n";
}
